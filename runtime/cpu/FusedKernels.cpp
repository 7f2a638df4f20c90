//===- FusedKernels.cpp - fused_elementwise: a chain of ops in one pass ---===//
//
// Layout: inputs then outputs (runtime/cpu/FusedProgram.h); outputs dense,
// one shape; an input of that shape, or repeating along the leading
// dimensions. Precision: f32, each op through ScalarMath.h, so the result
// is bit for bit what the chain of single kernels computes.
//
// The flat index range is cut into blocks of kBlock elements. For a block,
// each instruction is one loop over kBlock values (the switch on the op
// happens once per block and instruction, never per element, and each loop
// vectorizes), writing into a per-worker scratch row that stays in L1; only
// the outputs go back to memory. Intermediate values never exist as
// tensors: that is what fusing saves, in bytes moved and in buffers.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/FusedProgram.h"
#include "runtime/cpu/KernelTable.h"
#include "runtime/cpu/ScalarMath.h"

#include <algorithm>
#include <cstring>

namespace tailor::runtime::cpu {
namespace {

using fused::Arg;
using fused::Instruction;
using fused::Op;
using fused::Program;

constexpr int64_t kBlock = 512;

/// The launch's program, checked against its operands.
std::string decode(const KernelCall &call, Program &program) {
  const Attribute *text = call.attributes.find("program");
  if (!text || text->kind != Attribute::Kind::String) {
    return "attribute 'program' must be a string";
  }
  const Attribute *outputs = call.attributes.find("outputs");
  if (!outputs || outputs->kind != Attribute::Kind::Ints) {
    return "attribute 'outputs' must be a list of instruction numbers";
  }
  if (outputs->ints.size() >= call.operands.size()) {
    return "a fused launch with " + std::to_string(outputs->ints.size()) +
           " outputs needs more than " + std::to_string(call.operands.size()) +
           " operands";
  }
  uint32_t inputs =
      static_cast<uint32_t>(call.operands.size() - outputs->ints.size());
  return fused::parseProgram(text->s, inputs, outputs->ints, program);
}

/// True when `input` repeats along the leading dimensions of `shape`: its
/// shape, leading 1s dropped, is a suffix of `shape`.
bool repeatsInto(const std::vector<int64_t> &input,
                 const std::vector<int64_t> &shape) {
  auto first = std::find_if(input.begin(), input.end(),
                            [](int64_t d) { return d != 1; });
  size_t kept = static_cast<size_t>(input.end() - first);
  return kept <= shape.size() &&
         std::equal(first, input.end(), shape.end() - kept);
}

std::string checkFused(const KernelCall &call) {
  Program program;
  if (auto e = decode(call, program); !e.empty()) {
    return e;
  }
  if (auto e = expectAllF32(call); !e.empty()) {
    return e;
  }
  const size_t inputs = call.operands.size() - program.outputs.size();
  const std::vector<int64_t> &shape = call.operands[inputs].shape;
  for (size_t i = inputs; i < call.operands.size(); ++i) {
    if (auto e = expectShape(call, i, shape); !e.empty()) {
      return e;
    }
  }
  for (size_t i = 0; i < inputs; ++i) {
    const Tensor &input = call.operands[i];
    if (input.shape != shape && !repeatsInto(input.shape, shape)) {
      return "input " + std::to_string(i) + " " + shapeString(input.shape) +
             " neither has the outputs' shape " + shapeString(shape) +
             " nor repeats along its leading dimensions";
    }
  }
  return "";
}

template <typename F>
TAILOR_VECTOR_CLONES void unaryLoop(const float *a, float *y, int64_t n, F f) {
  for (int64_t j = 0; j < n; ++j) {
    y[j] = f(a[j]);
  }
}

template <typename F>
TAILOR_VECTOR_CLONES void binaryLoop(const float *a, const float *b, float *y,
                                     int64_t n, F f) {
  for (int64_t j = 0; j < n; ++j) {
    y[j] = f(a[j], b[j]);
  }
}

/// y[0, n) = op(a, b) over one block.
void apply(Op op, const float *a, const float *b, float *y, int64_t n) {
  switch (op) {
#define TL_UNARY(OP, UNARY)                                                    \
  case Op::OP:                                                                 \
    return unaryLoop(a, y, n, [](float x) {                                    \
      return applyUnary<Unary::UNARY>(x);                                      \
    });
    TL_UNARY(Neg, Neg)
    TL_UNARY(Abs, Abs)
    TL_UNARY(Exp, Exp)
    TL_UNARY(Log, Log)
    TL_UNARY(Sqrt, Sqrt)
    TL_UNARY(Rsqrt, Rsqrt)
    TL_UNARY(Reciprocal, Reciprocal)
    TL_UNARY(Tanh, Tanh)
    TL_UNARY(Sigmoid, Sigmoid)
    TL_UNARY(Silu, Silu)
    TL_UNARY(Relu, Relu)
    TL_UNARY(Erf, Erf)
    TL_UNARY(Gelu, GeluErf)
    TL_UNARY(GeluTanh, GeluTanh)
#undef TL_UNARY
  case Op::Add:
    return binaryLoop(a, b, y, n, [](float u, float v) { return u + v; });
  case Op::Sub:
    return binaryLoop(a, b, y, n, [](float u, float v) { return u - v; });
  case Op::Mul:
    return binaryLoop(a, b, y, n, [](float u, float v) { return u * v; });
  case Op::Div:
    return binaryLoop(a, b, y, n, [](float u, float v) { return u / v; });
  case Op::SiluGrad:
    return binaryLoop(a, b, y, n, [](float x, float dy) {
      return dy * derivative<Activation::Silu>(x);
    });
  case Op::GeluGrad:
    return binaryLoop(a, b, y, n, [](float x, float dy) {
      return dy * derivative<Activation::GeluErf>(x);
    });
  case Op::GeluTanhGrad:
    return binaryLoop(a, b, y, n, [](float x, float dy) {
      return dy * derivative<Activation::GeluTanh>(x);
    });
  }
}

/// Runs `program` over elements [begin, end) in blocks; `scratch` holds a
/// row per instruction and two rows for arguments that must be gathered.
void runBlocks(const KernelCall &call, const Program &program, size_t inputs,
               int64_t begin, int64_t end, std::vector<float> &scratch) {
  const size_t rows = program.instructions.size();
  float *values = scratch.data();
  float *gathered = values + rows * kBlock;
  for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
    const int64_t n = std::min(kBlock, end - b0);
    for (size_t k = 0; k < rows; ++k) {
      const Instruction &instruction = program.instructions[k];
      const float *args[2] = {nullptr, nullptr};
      for (int a = 0; a < fused::arity(instruction.op); ++a) {
        const Arg &arg = instruction.args[a];
        float *row = gathered + a * kBlock;
        if (arg.kind == Arg::Kind::Value) {
          args[a] = values + arg.index * kBlock;
        } else if (arg.kind == Arg::Kind::Constant) {
          std::fill(row, row + n, arg.constant);
          args[a] = row;
        } else {
          const Tensor &input = call.operands[arg.index];
          const float *x = input.as<float>();
          const int64_t period = input.numel();
          if (period == call.operands[inputs].numel()) {
            args[a] = x + b0;
          } else {
            for (int64_t j = 0; j < n; ++j) {
              row[j] = x[(b0 + j) % period];
            }
            args[a] = row;
          }
        }
      }
      apply(instruction.op, args[0], args[1], values + k * kBlock, n);
    }
    for (size_t o = 0; o < program.outputs.size(); ++o) {
      std::memcpy(call.operands[inputs + o].as<float>() + b0,
                  values + program.outputs[o] * kBlock, n * sizeof(float));
    }
  }
}

std::string runFused(const KernelCall &call) {
  Program program;
  if (auto e = decode(call, program); !e.empty()) {
    return e;
  }
  const size_t inputs = call.operands.size() - program.outputs.size();
  const int64_t total = call.operands[inputs].numel();
  const size_t rows = program.instructions.size() + 2;
  parallelFor(call, total, kTranscendentalGrain,
              [&](int64_t begin, int64_t end, int) {
                std::vector<float> scratch(rows * kBlock);
                runBlocks(call, program, inputs, begin, end, scratch);
              });
  return "";
}

} // namespace

void addFusedKernels(std::vector<KernelDef> &table) {
  table.push_back({"fused_elementwise", -1, checkFused, runFused});
}

} // namespace tailor::runtime::cpu
