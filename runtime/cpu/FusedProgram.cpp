//===- FusedProgram.cpp - parse and print fused elementwise programs ------===//

#include "runtime/cpu/FusedProgram.h"

#include <charconv>
#include <cstdio>

namespace tailor::runtime::fused {

namespace {

struct OpInfo {
  Op op;
  const char *name;
  int arity;
};

constexpr OpInfo kOps[] = {
    {Op::Neg, "neg", 1},
    {Op::Abs, "abs", 1},
    {Op::Exp, "exp", 1},
    {Op::Log, "log", 1},
    {Op::Sqrt, "sqrt", 1},
    {Op::Rsqrt, "rsqrt", 1},
    {Op::Reciprocal, "reciprocal", 1},
    {Op::Tanh, "tanh", 1},
    {Op::Sigmoid, "sigmoid", 1},
    {Op::Silu, "silu", 1},
    {Op::Relu, "relu", 1},
    {Op::Erf, "erf", 1},
    {Op::Gelu, "gelu", 1},
    {Op::GeluTanh, "gelu_tanh", 1},
    {Op::Add, "add", 2},
    {Op::Sub, "sub", 2},
    {Op::Mul, "mul", 2},
    {Op::Div, "div", 2},
    {Op::SiluGrad, "silu_grad", 2},
    {Op::GeluGrad, "gelu_grad", 2},
    {Op::GeluTanhGrad, "gelu_tanh_grad", 2},
};

const OpInfo &infoOf(Op op) { return kOps[static_cast<size_t>(op)]; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') {
    s.remove_prefix(1);
  }
  while (!s.empty() && s.back() == ' ') {
    s.remove_suffix(1);
  }
  return s;
}

/// One argument of clause `at`: xN, tN or a number.
std::string parseArg(std::string_view text, uint32_t inputs, uint32_t at,
                     Arg &arg) {
  text = trim(text);
  if (text.empty()) {
    return "an empty argument";
  }
  if (text[0] == 'x' || text[0] == 't') {
    uint32_t index = 0;
    auto [end, ec] =
        std::from_chars(text.data() + 1, text.data() + text.size(), index);
    if (ec != std::errc() || end != text.data() + text.size() ||
        text.size() == 1) {
      return "argument '" + std::string(text) + "' is not xN or tN";
    }
    bool input = text[0] == 'x';
    if (input ? index >= inputs : index >= at) {
      return "argument '" + std::string(text) + "' names " +
             (input ? "no input (the launch has " + std::to_string(inputs) +
                          ")"
                    : "no earlier instruction");
    }
    arg.kind = input ? Arg::Kind::Input : Arg::Kind::Value;
    arg.index = index;
    return "";
  }
  float value = 0;
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return "argument '" + std::string(text) + "' is not a number";
  }
  arg.kind = Arg::Kind::Constant;
  arg.constant = value;
  return "";
}

/// One clause `name(a[,b])`, instruction number `at`.
std::string parseClause(std::string_view clause, uint32_t inputs, uint32_t at,
                        Instruction &instruction) {
  size_t open = clause.find('(');
  if (open == std::string_view::npos || clause.back() != ')') {
    return "is not op(args)";
  }
  std::string_view name = trim(clause.substr(0, open));
  if (!opNamed(name, instruction.op)) {
    return "has no op '" + std::string(name) + "'";
  }
  std::string_view args = clause.substr(open + 1, clause.size() - open - 2);
  int want = arity(instruction.op);
  size_t comma = args.find(',');
  int count = comma == std::string_view::npos ? 1 : 2;
  if (count != want || (comma != std::string_view::npos &&
                        args.find(',', comma + 1) != std::string_view::npos)) {
    return "gives " + std::string(name) + " the wrong number of arguments (" +
           std::to_string(want) + " expected)";
  }
  for (int i = 0; i < want; ++i) {
    std::string_view text =
        want == 1 ? args : i == 0 ? args.substr(0, comma)
                                  : args.substr(comma + 1);
    if (std::string e = parseArg(text, inputs, at, instruction.args[i]);
        !e.empty()) {
      return e;
    }
  }
  return "";
}

std::string formatConstant(float value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", static_cast<double>(value));
  return buffer;
}

} // namespace

const char *opName(Op op) { return infoOf(op).name; }

int arity(Op op) { return infoOf(op).arity; }

bool opNamed(std::string_view name, Op &op) {
  for (const OpInfo &info : kOps) {
    if (name == info.name) {
      op = info.op;
      return true;
    }
  }
  return false;
}

std::string parseProgram(std::string_view text, uint32_t inputs,
                         const std::vector<int64_t> &outputs,
                         Program &program) {
  program = Program();
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(';', begin);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    std::string_view clause = trim(text.substr(begin, end - begin));
    uint32_t at = static_cast<uint32_t>(program.instructions.size());
    Instruction instruction;
    if (std::string e = parseClause(clause, inputs, at, instruction);
        !e.empty()) {
      return "program clause " + std::to_string(at) + " '" +
             std::string(clause) + "' " + e;
    }
    program.instructions.push_back(instruction);
    begin = end + 1;
  }
  if (outputs.empty()) {
    return "a fused launch needs at least one output";
  }
  for (int64_t output : outputs) {
    if (output < 0 ||
        output >= static_cast<int64_t>(program.instructions.size())) {
      return "output instruction " + std::to_string(output) +
             " is not in the program (" +
             std::to_string(program.instructions.size()) + " instructions)";
    }
    program.outputs.push_back(static_cast<uint32_t>(output));
  }
  return "";
}

std::string printProgram(const Program &program) {
  std::string text;
  for (const Instruction &instruction : program.instructions) {
    if (!text.empty()) {
      text += ';';
    }
    text += opName(instruction.op);
    text += '(';
    for (int i = 0; i < arity(instruction.op); ++i) {
      const Arg &arg = instruction.args[i];
      text += i ? "," : "";
      switch (arg.kind) {
      case Arg::Kind::Input:
        text += 'x' + std::to_string(arg.index);
        break;
      case Arg::Kind::Value:
        text += 't' + std::to_string(arg.index);
        break;
      case Arg::Kind::Constant:
        text += formatConstant(arg.constant);
        break;
      }
    }
    text += ')';
  }
  return text;
}

std::string fusedFunctionName(std::string_view text,
                              const std::vector<int64_t> &outputs,
                              const std::vector<InputKind> &kinds) {
  uint64_t hash = 0xcbf29ce484222325ull;
  auto mix = [&](unsigned char c) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  };
  for (char c : text) {
    mix(static_cast<unsigned char>(c));
  }
  for (int64_t output : outputs) {
    mix('|');
    for (char c : std::to_string(output)) {
      mix(static_cast<unsigned char>(c));
    }
  }
  mix('|');
  for (InputKind kind : kinds) {
    mix(kind == InputKind::Full ? 'f' : 'r');
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(hash));
  return std::string("tailor_fused_") + hex;
}

} // namespace tailor::runtime::fused
