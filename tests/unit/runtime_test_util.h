// Models for the runtime tests (memory planning, the public API, artifacts),
// built with GraphBuilder and run through the pass pipeline.
#pragma once

#include <memory>
#include <random>
#include <vector>

#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"

namespace tessel::testing {

inline Tensor seeded_weights(std::vector<int64_t> shape, uint32_t seed) {
  Tensor t(DType::F32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, u(rng));
  return t;
}

// x: f32[batch, 16] -> MatMul+Add -> Relu -> MatMul+Add -> Softmax: f32[batch, 10].
inline std::unique_ptr<Model> mlp_softmax_model() {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim::sym("batch"), 16});
  Value* h = b.op("MatMul", {x, b.constant(seeded_weights({16, 32}, 1), "w1")});
  h = b.op("Relu", {b.op("Add", {h, b.constant(seeded_weights({32}, 2), "b1")})});
  Value* y = b.op("MatMul", {h, b.constant(seeded_weights({32, 10}, 3), "w2")});
  y = b.op("Add", {y, b.constant(seeded_weights({10}, 4), "b2")});
  b.output(b.op("Softmax", {y}, {{"axis", Attribute::of_int(-1)}}));
  run_pipeline(*m, PassOptions{});
  return m;
}

// A value read by two kernels (so it is stored), then an elementwise kernel
// that is its last reader: the planner's in-place case. TopK in the middle
// runs on the interpreter (several outputs), so the plan must keep the
// values it reads out of the arena.
inline std::unique_ptr<Model> branchy_model() {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim::sym("batch"), 24});
  Value* t = b.op("Exp", {x});
  Value* p = b.op("MatMul", {t, b.constant(seeded_weights({24, 24}, 5), "w")});
  Value* q = b.op("Sigmoid", {t});  // its own kernel (a MatMul reads it); t dies here
  Value* r = b.op("MatMul", {q, b.constant(seeded_weights({24, 24}, 6), "w2")});
  auto tk = b.ops("TopK", {r, b.const_i64({4}, "k")}, 2, {{"axis", Attribute::of_int(-1)}});
  Value* s = b.op("Tanh", {b.op("Add", {tk[0], b.op("ReduceMax", {p}, {{"axes", Attribute::of_ints({-1})}})})});
  b.output(b.op("Mul", {s, s}));
  run_pipeline(*m, PassOptions{});
  return m;
}

}  // namespace tessel::testing
