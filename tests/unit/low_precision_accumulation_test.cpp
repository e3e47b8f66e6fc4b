// bf16/f16 contractions and reductions accumulate in f32 (the interpreter in
// double) and round once. The terms are 1 followed by n small ones that a
// low-precision accumulator would lose one by one: bf16 (8 significant bits)
// rounds 1 + 2^-9 back to 1, f16 (11 bits) 1 + 2^-12; the exact sum is 1.5
// (bf16: 256 x 2^-9) or 1.25 (f16: 1024 x 2^-12), both exact in the type.
// Checked on the interpreter and on the lowered kernels (loop IR evaluator),
// and the lowered MatMul's form: cast<bf16>(Σ cast<f32>(a) * cast<f32>(b))
// from an f32 zero, which the GEMM paths recognise.
#include <gtest/gtest.h>

#include "lower_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/loop/printer.h"

namespace tessel {
namespace {

struct Terms {
  DType dt;
  int64_t n;     // terms in a sum: 1, then n - 1 small ones
  double small;  // the small term
  double sum;
};

Terms terms_for(DType dt) {
  return dt == DType::BF16 ? Terms{dt, 257, 1.0 / 512, 1.5} : Terms{dt, 1025, 1.0 / 4096, 1.25};
}

// Element k of a sum.
double term(const Terms& t, int64_t k) { return k == 0 ? 1.0 : t.small; }

// `rows` rows of the terms.
Tensor term_rows(const Terms& t, int64_t rows) {
  Tensor x(t.dt, {rows, t.n});
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, term(t, i % t.n));
  return x;
}

Tensor ones(DType dt, std::vector<int64_t> shape) {
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, 1.0);
  return t;
}

// The only output of m on `inputs`, from the interpreter and from the lowered
// kernels; both must be `want` (and every node compiled).
void expect_both(Model& m, const std::vector<RtValue>& inputs, double want) {
  PassOptions o;
  run_pipeline(m, o);
  const std::vector<RtValue> ref = Interpreter().run(*m.graph, inputs);
  ASSERT_EQ(ref.size(), 1u);
  for (int64_t i = 0; i < ref[0].tensor.numel(); ++i) EXPECT_EQ(ref[0].tensor.get_f64(i), want) << "interpreter";
  const testing::EvalRun got = testing::run_lowered(m, inputs);
  EXPECT_EQ(got.interpreted, 0u);
  ASSERT_EQ(got.outputs.size(), 1u);
  EXPECT_EQ(got.outputs[0].tensor.dtype(), ref[0].tensor.dtype());
  for (int64_t i = 0; i < got.outputs[0].tensor.numel(); ++i)
    EXPECT_EQ(got.outputs[0].tensor.get_f64(i), want) << "lowered";
}

class LowPrecisionAccumulation : public ::testing::TestWithParam<DType> {};

TEST_P(LowPrecisionAccumulation, MatMul) {
  const Terms t = terms_for(GetParam());
  Model m;
  GraphBuilder b(m);
  Value* a = b.input("a", t.dt, {2, t.n});
  Value* w = b.input("w", t.dt, {t.n, 3});
  b.output(b.op("MatMul", {a, w}));
  expect_both(m, {RtValue(term_rows(t, 2)), RtValue(ones(t.dt, {t.n, 3}))}, t.sum);
}

TEST_P(LowPrecisionAccumulation, GemmTransposedWithBias) {
  const Terms t = terms_for(GetParam());
  Model m;
  GraphBuilder b(m);
  Value* a = b.input("a", t.dt, {t.n, 2});
  Value* w = b.input("w", t.dt, {3, t.n});
  Value* c = b.input("c", t.dt, {3});
  b.output(b.op("Gemm", {a, w, c}, {{"transA", Attribute::of_int(1)}, {"transB", Attribute::of_int(1)}}));
  Tensor at(t.dt, {t.n, 2});  // A^T's rows are the terms
  for (int64_t k = 0; k < t.n; ++k)
    for (int64_t i = 0; i < 2; ++i) at.set_f64(k * 2 + i, term(t, k));
  Tensor bias(t.dt, {3});  // + 0.5, exact
  for (int64_t j = 0; j < 3; ++j) bias.set_f64(j, 0.5);
  expect_both(m, {RtValue(at), RtValue(ones(t.dt, {3, t.n})), RtValue(bias)}, t.sum + 0.5);
}

TEST_P(LowPrecisionAccumulation, ConvOverChannels) {
  const Terms t = terms_for(GetParam());
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", t.dt, {1, t.n, 2, 2});
  Value* w = b.input("w", t.dt, {2, t.n, 1, 1});
  b.output(b.op("Conv", {x, w}));
  Tensor xt(t.dt, {1, t.n, 2, 2});
  for (int64_t c = 0; c < t.n; ++c)
    for (int64_t p = 0; p < 4; ++p) xt.set_f64(c * 4 + p, term(t, c));
  expect_both(m, {RtValue(xt), RtValue(ones(t.dt, {2, t.n, 1, 1}))}, t.sum);
}

TEST_P(LowPrecisionAccumulation, ReduceSumAndMean) {
  const Terms t = terms_for(GetParam());
  for (const std::string op : {"ReduceSum", "ReduceMean"}) {
    Model m;
    GraphBuilder b(m);
    Value* x = b.input("x", t.dt, {2, t.n});
    b.output(b.op(op, {x, b.const_i64({1})}, {{"keepdims", Attribute::of_int(0)}}));
    Tensor want(t.dt, {1});
    want.set_f64(0, op == "ReduceSum" ? t.sum : t.sum / static_cast<double>(t.n));
    expect_both(m, {RtValue(term_rows(t, 2))}, want.get_f64(0));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, LowPrecisionAccumulation, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The form of a lowered bf16 MatMul: f32 accumulator from 0, operands cast
// up from bf16 loads, one cast down at the store.
TEST(LowPrecisionLowering, MatMulAccumulatesInF32AndRoundsOnce) {
  Model m;
  GraphBuilder b(m);
  Value* a = b.input("a", DType::BF16, {4, 8});
  Value* w = b.input("w", DType::BF16, {8, 5});
  b.output(b.op("MatMul", {a, w}));
  PassOptions o;
  run_pipeline(m, o);
  const CompiledModel c = lower_for_cpu(m);
  ASSERT_EQ(c.lowered.size(), 1u);
  const std::string text = loop::print(c.lowered[0].kernel);
  EXPECT_NE(text.find("= 0.0f32"), std::string::npos) << text;
  EXPECT_NE(text.find("cast<f32>(in0["), std::string::npos) << text;
  EXPECT_NE(text.find("cast<f32>(in1["), std::string::npos) << text;
  EXPECT_NE(text.find("= cast<bf16>("), std::string::npos) << text;
}

}  // namespace
}  // namespace tessel
