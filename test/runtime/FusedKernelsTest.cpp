//===- FusedKernelsTest.cpp - fused_elementwise and its program text ------===//

#include "runtime/cpu/FusedProgram.h"
#include "test/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace tailor::runtime;
using namespace tailor::runtime::testing;

namespace {

/// The outputs attribute and program of a launch.
std::vector<Attribute> programAttrs(const std::string &text,
                                    std::vector<int64_t> outputs) {
  return {stringAttr("program", text), intsAttr("outputs", std::move(outputs))};
}

void expectBitsEqual(const Buffer &got, const Buffer &want, const char *what) {
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < got.numel(); ++i) {
    ASSERT_EQ(got.at(i), want.at(i)) << what << " at " << i;
  }
}

} // namespace

// Tests that every op's name reads back as that op, and that programs print
// back to the text they were parsed from, constants exactly.
TEST(FusedProgramTest, ParsesAndPrintsBack) {
  for (int i = 0; i <= static_cast<int>(fused::Op::GeluTanhGrad); ++i) {
    auto op = static_cast<fused::Op>(i);
    fused::Op read;
    ASSERT_TRUE(fused::opNamed(fused::opName(op), read)) << fused::opName(op);
    EXPECT_EQ(read, op);
  }
  const std::string text =
      "silu(x0);mul(t0,x1);silu_grad(x0,t1);add(t2,0.100000001);neg(t3)";
  fused::Program program;
  ASSERT_EQ(fused::parseProgram(text, 2, {1, 4}, program), "");
  EXPECT_EQ(program.instructions.size(), 5u);
  EXPECT_EQ(program.instructions[3].args[1].constant, 0.1f);
  EXPECT_EQ(fused::printProgram(program), text);
  EXPECT_EQ(fused::parseProgram(" exp( x0 ) ; mul(t0 , -2.5) ", 1, {1}, program),
            "");
  EXPECT_EQ(fused::printProgram(program), "exp(x0);mul(t0,-2.5)");
}

// Tests that a malformed program is an error naming the clause.
TEST(FusedProgramTest, RejectsMalformedPrograms) {
  fused::Program program;
  struct Case {
    const char *text;
    std::vector<int64_t> outputs;
    const char *expect;
  } cases[] = {
      {"cube(x0)", {0}, "clause 0 'cube(x0)' has no op 'cube'"},
      {"exp(x0);add(t0)", {1}, "wrong number of arguments (2 expected)"},
      {"exp(x0,x0)", {0}, "wrong number of arguments (1 expected)"},
      {"exp(x2)", {0}, "names no input (the launch has 2)"},
      {"exp(t0)", {0}, "names no earlier instruction"},
      {"exp(y0)", {0}, "is not a number"},
      {"exp x0", {0}, "is not op(args)"},
      {"exp(x0);", {0}, "clause 1 '' is not op(args)"},
      {"exp(x0)", {1}, "output instruction 1 is not in the program"},
      {"exp(x0)", {}, "needs at least one output"},
  };
  for (const Case &c : cases) {
    std::string error = fused::parseProgram(c.text, 2, c.outputs, program);
    EXPECT_NE(error.find(c.expect), std::string::npos)
        << c.text << ": " << error;
  }
}

// Tests that one fused launch computes, bit for bit, what the chain of
// single kernels computes: a SwiGLU-like forward and backward with a bias
// repeating along the leading dimensions and an inlined constant, over a
// size that is no multiple of the block, on one thread and on three.
TEST(FusedKernelsTest, MatchesTheChainOfKernelsBitForBit) {
  const std::vector<int64_t> shape = {3, 1001};
  Buffer g = randomBuffer(shape, -4, 4, 1), u = randomBuffer(shape, -2, 2, 2);
  Buffer dy = randomBuffer(shape, -1, 1, 3), bias = randomBuffer({1001}, -1, 1, 4);
  // s = silu(g); p = s * u; dg = silu_grad(g, dy * u); q = gelu_tanh(p +
  // bias) * 0.5
  Buffer s(DType::F32, shape), p(DType::F32, shape), du(DType::F32, shape),
      dg(DType::F32, shape), pb(DType::F32, shape), ge(DType::F32, shape),
      q(DType::F32, shape);
  Buffer half(DType::F32, {});
  half.data<float>()[0] = 0.5f;
  ASSERT_EQ(runKernel("silu", {&g, &s}), "");
  ASSERT_EQ(runKernel("mul", {&s, &u, &p}), "");
  ASSERT_EQ(runKernel("mul", {&dy, &u, &du}), "");
  ASSERT_EQ(runKernel("silu_grad", {&g, &du, &dg}), "");
  ASSERT_EQ(runKernel("add", {&p, &bias, &pb}), "");
  ASSERT_EQ(runKernel("gelu", {&pb, &ge}, {stringAttr("approximate", "tanh")}),
            "");
  ASSERT_EQ(runKernel("mul", {&ge, &half, &q}), "");
  const std::string text = "silu(x0);mul(t0,x1);mul(x2,x1);silu_grad(x0,t2);"
                           "add(t1,x3);gelu_tanh(t4);mul(t5,0.5)";
  for (ThreadPool *pool : {&pool1(), &pool3()}) {
    Buffer fs(DType::F32, shape), fp(DType::F32, shape), fdg(DType::F32, shape),
        fq(DType::F32, shape);
    ASSERT_EQ(runKernel("fused_elementwise",
                        {&g, &u, &dy, &bias, &fs, &fp, &fdg, &fq},
                        programAttrs(text, {0, 1, 3, 6}), pool),
              "");
    expectBitsEqual(fs, s, "silu");
    expectBitsEqual(fp, p, "silu * u");
    expectBitsEqual(fdg, dg, "silu_grad");
    expectBitsEqual(fq, q, "gelu_tanh(p + bias) * 0.5");
  }
}

// Tests that every unary op and the other binary ops match their single
// kernels, and that a scalar input repeats over every element.
TEST(FusedKernelsTest, EveryOpMatchesItsKernel) {
  const std::vector<int64_t> shape = {5, 7};
  Buffer x = randomBuffer(shape, 0.1, 3, 5), y = randomBuffer(shape, 0.5, 2, 6);
  Buffer scalar = randomBuffer({1}, 1, 2, 7);
  struct Unary {
    const char *program, *kernel, *approximate;
  } unaries[] = {{"neg", "neg", nullptr},   {"abs", "abs", nullptr},
                 {"exp", "exp", nullptr},   {"log", "log", nullptr},
                 {"sqrt", "sqrt", nullptr}, {"rsqrt", "rsqrt", nullptr},
                 {"reciprocal", "reciprocal", nullptr},
                 {"tanh", "tanh", nullptr}, {"sigmoid", "sigmoid", nullptr},
                 {"relu", "relu", nullptr}, {"erf", "erf", nullptr},
                 {"gelu", "gelu", "none"}};
  for (const Unary &u : unaries) {
    Buffer want(DType::F32, shape), got(DType::F32, shape);
    std::vector<Attribute> attrs;
    if (u.approximate) {
      attrs.push_back(stringAttr("approximate", u.approximate));
    }
    ASSERT_EQ(runKernel(u.kernel, {&x, &want}, attrs), "");
    ASSERT_EQ(runKernel("fused_elementwise", {&x, &got},
                        programAttrs(std::string(u.program) + "(x0)", {0})),
              "");
    expectBitsEqual(got, want, u.program);
  }
  for (const char *binary : {"sub", "div"}) {
    Buffer want(DType::F32, shape), got(DType::F32, shape);
    ASSERT_EQ(runKernel(binary, {&x, &scalar, &want}), "");
    ASSERT_EQ(runKernel("fused_elementwise", {&x, &scalar, &got},
                        programAttrs(std::string(binary) + "(x0,x1)", {0})),
              "");
    expectBitsEqual(got, want, binary);
  }
  Buffer want(DType::F32, shape), got(DType::F32, shape);
  ASSERT_EQ(runKernel("gelu_grad", {&x, &y, &want}), "");
  ASSERT_EQ(runKernel("fused_elementwise", {&x, &y, &got},
                      programAttrs("gelu_grad(x0,x1)", {0})),
            "");
  expectBitsEqual(got, want, "gelu_grad");
}

// Tests that a launch the program does not fit is an error, not a run.
TEST(FusedKernelsTest, ChecksRejectMalformedLaunches) {
  Buffer x = randomBuffer({2, 6}, -1, 1, 8), y(DType::F32, {2, 6});
  Buffer column = randomBuffer({2, 1}, -1, 1, 9), wrong(DType::F32, {3, 6});
  Buffer ints(DType::I64, {2, 6});
  EXPECT_EQ(checkKernel("fused_elementwise", {&x, &y},
                        programAttrs("exp(x0)", {0})),
            "");
  EXPECT_NE(checkKernel("fused_elementwise", {&x, &y}, {}), "");
  EXPECT_NE(checkKernel("fused_elementwise", {&x, &y},
                        programAttrs("exp(x1)", {0})),
            "");
  // A column does not repeat along the leading dimensions.
  EXPECT_NE(checkKernel("fused_elementwise", {&x, &column, &y},
                        programAttrs("add(x0,x1)", {0})),
            "");
  EXPECT_NE(checkKernel("fused_elementwise", {&x, &y, &wrong},
                        programAttrs("exp(x0);neg(t0)", {0, 1})),
            "");
  EXPECT_NE(checkKernel("fused_elementwise", {&ints, &y},
                        programAttrs("exp(x0)", {0})),
            "");
  EXPECT_NE(checkKernel("fused_elementwise", {&x},
                        programAttrs("exp(x0)", {0})),
            "");
}
