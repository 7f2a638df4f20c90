//===- FusedKernelSource.cpp - CUDA C++ for fused elementwise programs ----===//
//
// A generated kernel is a grid-stride loop over the elements: it loads each
// input the program reads once into a register, computes one `const float`
// per instruction (ElementwiseMath.cuh's functions, so the formulas are the
// hand-written kernels'), and stores each output. These kernels are
// memory-bound, so:
//   - when every input is Full and every pointer 16-byte aligned (checked
//     in the kernel), a first loop moves packs of four (one 16-byte access
//     per operand) and runs the instructions once per lane; the scalar
//     loop then does the n % 4 tail (or everything, unaligned);
//   - a Repeating input keeps its index modulo its period in a register,
//     advanced by the grid stride (mod the period) each iteration: no
//     64-bit division per element.
//
//===----------------------------------------------------------------------===//

#include "codegen/FusedKernelSource.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

namespace tailor::codegen {

using runtime::fused::Arg;
using runtime::fused::InputKind;
using runtime::fused::Instruction;
using runtime::fused::Op;
using runtime::fused::Program;

namespace {

/// The element type of inputs and outputs (f32 today; tl::load and
/// tl::store convert, so bf16 storage changes only this).
constexpr const char *kStorage = "float";

/// How an op is written: a format with %0 and %1 for its arguments.
const char *formatOf(Op op) {
  switch (op) {
  case Op::Neg:
    return "-%0";
  case Op::Abs:
    return "fabsf(%0)";
  case Op::Exp:
    return "expf(%0)";
  case Op::Log:
    return "logf(%0)";
  case Op::Sqrt:
    return "sqrtf(%0)";
  case Op::Rsqrt:
    return "tl::math::rsqrt(%0)";
  case Op::Reciprocal:
    return "tl::math::reciprocal(%0)";
  case Op::Tanh:
    return "tanhf(%0)";
  case Op::Sigmoid:
    return "tl::math::sigmoid(%0)";
  case Op::Silu:
    return "tl::math::silu(%0)";
  case Op::Relu:
    return "tl::math::relu(%0)";
  case Op::Erf:
    return "erff(%0)";
  case Op::Gelu:
    return "tl::math::gelu(%0)";
  case Op::GeluTanh:
    return "tl::math::geluTanh(%0)";
  case Op::Add:
    return "tl::math::add(%0, %1)";
  case Op::Sub:
    return "tl::math::sub(%0, %1)";
  case Op::Mul:
    return "tl::math::mul(%0, %1)";
  case Op::Div:
    return "tl::math::div(%0, %1)";
  case Op::SiluGrad:
    return "tl::math::siluGrad(%0, %1)";
  case Op::GeluGrad:
    return "tl::math::geluGrad(%0, %1)";
  case Op::GeluTanhGrad:
    return "tl::math::geluTanhGrad(%0, %1)";
  }
  return "";
}

/// A float literal that reads back as exactly `value`: nine significant
/// digits; infinities and NaN by their bits.
std::string floatLiteral(float value) {
  char buffer[48];
  if (!std::isfinite(value)) {
    uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    std::snprintf(buffer, sizeof(buffer), "tl::bitsFloat(0x%08xu)",
                  static_cast<unsigned>(bits));
    return buffer;
  }
  std::snprintf(buffer, sizeof(buffer), "%.9g", static_cast<double>(value));
  std::string text = buffer;
  if (text.find_first_of(".e") == std::string::npos) {
    text += ".0";
  }
  text += 'f';
  return value < 0 ? "(" + text + ")" : text;
}

std::string argument(const Arg &arg) {
  switch (arg.kind) {
  case Arg::Kind::Input:
    return "a" + std::to_string(arg.index);
  case Arg::Kind::Value:
    return "t" + std::to_string(arg.index);
  case Arg::Kind::Constant:
    return floatLiteral(arg.constant);
  }
  return "";
}

/// `instruction`'s expression, its arguments substituted into formatOf.
std::string expression(const Instruction &instruction) {
  std::string text;
  for (const char *c = formatOf(instruction.op); *c; ++c) {
    if (*c == '%' && (c[1] == '0' || c[1] == '1')) {
      text += argument(instruction.args[c[1] - '0']);
      ++c;
    } else {
      text += *c;
    }
  }
  return text;
}

/// Which inputs some instruction reads.
std::vector<bool> inputsRead(const Program &program, size_t inputs) {
  std::vector<bool> read(inputs, false);
  for (const Instruction &instruction : program.instructions) {
    for (int a = 0; a < runtime::fused::arity(instruction.op); ++a) {
      if (instruction.args[a].kind == Arg::Kind::Input) {
        read[instruction.args[a].index] = true;
      }
    }
  }
  return read;
}

/// The parameter list, in the order FusedKernelSource.h documents; those
/// of inputs no instruction reads go unnamed (no unused-parameter warning).
std::string parameters(const Program &program,
                       const std::vector<InputKind> &kinds,
                       const std::vector<bool> &read) {
  std::string text;
  auto add = [&](const std::string &parameter) {
    text += text.empty() ? "" : ", ";
    text += parameter;
  };
  for (size_t i = 0; i < kinds.size(); ++i) {
    add("const " + std::string(kStorage) + " *" +
        (read[i] ? "x" + std::to_string(i) : ""));
  }
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    add(std::string(kStorage) + " *y" + std::to_string(o));
  }
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] == InputKind::Repeating) {
      add("long long" + (read[i] ? " p" + std::to_string(i) : ""));
    }
  }
  add("long long n");
  return text;
}

/// One `const float tK = ...;` line per instruction.
std::string instructionLines(const Program &program,
                             const std::string &indent) {
  std::string text;
  for (size_t k = 0; k < program.instructions.size(); ++k) {
    text += indent + "const float t" + std::to_string(k) + " = " +
            expression(program.instructions[k]) + ";\n";
  }
  return text;
}

/// Whether the kernel gets the vector loop: every input Full, so element i
/// of every operand is at the same index and packs line up.
bool vectorizable(const std::vector<InputKind> &kinds) {
  for (InputKind kind : kinds) {
    if (kind != InputKind::Full) {
      return false;
    }
  }
  return true;
}

/// Packs of four while every pointer is 16-byte aligned: each operand one
/// 16-byte access, the instructions once per lane. Leaves `begin` at the
/// first element it did not do.
std::string vectorLoop(const Program &program,
                       const std::vector<InputKind> &kinds,
                       const std::vector<bool> &read) {
  std::vector<std::string> pointers;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (read[i]) {
      pointers.push_back("x" + std::to_string(i));
    }
  }
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    pointers.push_back("y" + std::to_string(o));
  }
  std::string aligned;
  for (const std::string &pointer : pointers) {
    aligned += (aligned.empty() ? "" : " && ") +
               ("tl::fused::aligned16(" + pointer + ")");
  }
  std::string text = "  if (" + aligned + ") {\n";
  text += "    const tl::i64 packs = n / 4;\n";
  text +=
      "    for (tl::i64 j = tl::globalThread(); j < packs; j += stride) {\n";
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (read[i]) {
      std::string s = std::to_string(i);
      text += "      const tl::fused::Pack4 v" + s +
              " = tl::fused::loadPack(x" + s + ", j);\n";
    }
  }
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    text += "      tl::fused::Pack4 w" + std::to_string(o) + " = {};\n";
  }
  text += "#pragma unroll\n      for (int l = 0; l < 4; ++l) {\n";
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (read[i]) {
      std::string s = std::to_string(i);
      text += "        const float a" + s + " = v" + s + ".v[l];\n";
    }
  }
  text += instructionLines(program, "        ");
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    text += "        w" + std::to_string(o) + ".v[l] = t" +
            std::to_string(program.outputs[o]) + ";\n";
  }
  text += "      }\n";
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    std::string s = std::to_string(o);
    text += "      tl::fused::storePack(y" + s + ", j, w" + s + ");\n";
  }
  text += "    }\n    begin = packs * 4;\n  }\n";
  return text;
}

/// One element per iteration from `begin`: loads (a Repeating input at its
/// running index mod its period), one line per instruction, stores.
std::string scalarLoop(const Program &program,
                       const std::vector<InputKind> &kinds,
                       const std::vector<bool> &read) {
  std::string text = "  tl::i64 i = begin + tl::globalThread();\n";
  text += "  if (i >= n) {\n    return;\n  }\n";
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (read[k] && kinds[k] == InputKind::Repeating) {
      std::string s = std::to_string(k);
      text += "  tl::i64 r" + s + " = i % p" + s + ";\n";
      text += "  const tl::i64 s" + s + " = stride % p" + s + ";\n";
    }
  }
  text += "  for (; i < n; i += stride) {\n";
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (read[i]) {
      std::string index =
          kinds[i] == InputKind::Full ? "i" : "r" + std::to_string(i);
      text += "    const float a" + std::to_string(i) + " = tl::load(x" +
              std::to_string(i) + ", " + index + ");\n";
    }
  }
  text += instructionLines(program, "    ");
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    text += "    tl::store(y" + std::to_string(o) + ", i, t" +
            std::to_string(program.outputs[o]) + ");\n";
  }
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (read[i] && kinds[i] == InputKind::Repeating) {
      std::string r = "r" + std::to_string(i), p = "p" + std::to_string(i);
      text += "    " + r + " += s" + std::to_string(i) + ";\n";
      text += "    " + r + " = " + r + " >= " + p + " ? " + r + " - " + p +
              " : " + r + ";\n";
    }
  }
  text += "  }\n";
  return text;
}

} // namespace

std::string fusedKernelSource(const Program &program, std::string_view text,
                              const std::vector<InputKind> &kinds) {
  const std::vector<int64_t> outputIndices(program.outputs.begin(),
                                           program.outputs.end());
  const std::string name =
      runtime::fused::fusedFunctionName(text, outputIndices, kinds);
  const std::vector<bool> read = inputsRead(program, kinds.size());
  std::string outputs, layout;
  for (uint32_t output : program.outputs) {
    outputs += (outputs.empty() ? "t" : ", t") + std::to_string(output);
  }
  for (InputKind kind : kinds) {
    layout += layout.empty() ? "" : ", ";
    layout += kind == InputKind::Full ? "full" : "repeating";
  }
  std::string source;
  source += "// " + std::string(text) + "\n";
  source += "// inputs: " + (layout.empty() ? "none" : layout) +
            "; outputs: " + outputs + "\n";
  source += "TL_GLOBAL void " + name + "(" + parameters(program, kinds, read) +
            ") {\n";
  source += "  const tl::i64 stride = tl::gridThreads();\n";
  source += "  tl::i64 begin = 0;\n";
  if (vectorizable(kinds)) {
    source += vectorLoop(program, kinds, read);
  }
  source += scalarLoop(program, kinds, read);
  source += "}\n";
  source += "TL_REGISTER(" + name + ")\n";
  return source;
}

std::string
fusedTranslationUnit(const std::vector<FusedKernelRequest> &requests,
                     std::string &source) {
  source = "// Fused elementwise kernels, generated by tailor "
           "(codegen/FusedKernelSource.cpp).\n"
           "#include \"codegen/cuda/Device.cuh\"\n"
           "#include \"codegen/cuda/ElementwiseMath.cuh\"\n";
  // One function per name (program, outputs and input kinds).
  std::set<std::string> written;
  for (const FusedKernelRequest &request : requests) {
    Program program;
    std::string problem = runtime::fused::parseProgram(
        request.text, static_cast<uint32_t>(request.kinds.size()),
        request.outputs, program);
    if (!problem.empty()) {
      return "fused program '" + request.text + "': " + problem;
    }
    std::string name = runtime::fused::fusedFunctionName(
        request.text, request.outputs, request.kinds);
    if (!written.insert(name).second) {
      continue;
    }
    source += "\n" + fusedKernelSource(program, request.text, request.kinds);
  }
  return "";
}

std::vector<InputKind> fusedInputKinds(const std::vector<int64_t> &inputNumels,
                                       int64_t outputNumel) {
  std::vector<InputKind> kinds;
  for (int64_t numel : inputNumels) {
    kinds.push_back(numel == outputNumel ? InputKind::Full
                                         : InputKind::Repeating);
  }
  return kinds;
}

} // namespace tailor::codegen
