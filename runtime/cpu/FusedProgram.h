//===- FusedProgram.h - what one fused elementwise launch computes -*- C++ -*-===//
//
// The planner groups chains of elementwise ops (add, mul, silu, silu_grad,
// ...) of one shape into a single `fused_elementwise` launch; this is the
// contract between it and the backends. A launch's operands are its inputs
// then its outputs; its attributes say what each output is:
//   - `program` (string): straight-line instructions over f32 values, one
//     per line-free clause separated by ';', e.g.
//       "silu(x0);mul(t0,x1)"
//     where `xN` is input N at the element, `tN` the value of instruction N
//     and a number a constant (written so it reads back exactly);
//   - `outputs` (ints): the instruction whose value each output holds.
// Every output has the group's shape; an input either has it too, or holds
// fewer elements that repeat along the leading dimensions (a scalar, or a
// bias [N] against [..., N]), read at `index mod numel`.
//
// The CPU backend interprets a program a block of elements at a time
// (runtime/cpu/FusedKernels.cpp: each instruction a vectorizable loop over
// the block, so no value makes a round trip through memory); the CUDA
// backend runs a kernel generated from the same text at compile time
// (codegen/FusedKernelSource.cpp), named by fusedFunctionName.
//
// No LLVM here: the runtime library links none.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CPU_FUSEDPROGRAM_H
#define TAILOR_RUNTIME_CPU_FUSEDPROGRAM_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tailor::runtime::fused {

/// The operations a program may use; each has the semantics (and, on the
/// CPU, the code) of the tg op and CPU kernel of the same name.
enum class Op : uint8_t {
  // unary
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Tanh,
  Sigmoid,
  Silu,
  Relu,
  Erf,
  Gelu,     // erf form
  GeluTanh, // approximate = 'tanh'
  // binary
  Add,
  Sub,
  Mul,
  Div,
  // gradients: (x, dy) -> dy f'(x)
  SiluGrad,
  GeluGrad,
  GeluTanhGrad,
};

/// The name a program spells `op` with ("silu_grad").
const char *opName(Op op);
/// 1 or 2.
int arity(Op op);
/// The op spelled `name`; false when there is none.
bool opNamed(std::string_view name, Op &op);

struct Arg {
  enum class Kind : uint8_t { Input, Value, Constant };
  Kind kind = Kind::Constant;
  /// The input or instruction number.
  uint32_t index = 0;
  float constant = 0;
};

struct Instruction {
  Op op = Op::Add;
  Arg args[2];
};

struct Program {
  std::vector<Instruction> instructions;
  /// The instruction each output holds.
  std::vector<uint32_t> outputs;
};

/// Parses `text` for a launch with `inputs` inputs; instructions may only
/// read inputs below `inputs` and earlier instructions, and `outputs` must
/// name instructions. Returns "" or what is wrong, naming the clause.
std::string parseProgram(std::string_view text, uint32_t inputs,
                         const std::vector<int64_t> &outputs, Program &program);

/// The text parseProgram reads back to `program`.
std::string printProgram(const Program &program);

/// Whether an input is read at the element (`Full`) or at `index mod numel`
/// (`Repeating`: fewer elements repeated along the leading dimensions).
enum class InputKind : uint8_t { Full, Repeating };

/// The generated CUDA kernel's entry point for `text` writing `outputs`
/// over inputs read as `kinds`: "tailor_fused_" and a 64-bit FNV-1a hash of
/// the three in hex, so one program, outputs and layout is one function
/// whoever asks.
std::string fusedFunctionName(std::string_view text,
                              const std::vector<int64_t> &outputs,
                              const std::vector<InputKind> &kinds);

} // namespace tailor::runtime::fused

#endif // TAILOR_RUNTIME_CPU_FUSEDPROGRAM_H
