#include "tessel/driver/demo.h"

#include <cmath>

#include "tessel/driver/random_inputs.h"

namespace tessel {

namespace {

// Uniform weights scaled by 1/sqrt(fan_in), so activations keep their scale.
Tensor weights(std::vector<int64_t> shape, int64_t fan_in, SplitMix64& rng) {
  Tensor t(DType::F32, std::move(shape));
  const double scale = 1.0 / std::sqrt(static_cast<double>(fan_in));
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>((2 * rng.uniform01() - 1) * scale);
  return t;
}

Value* op(Graph& g, const std::string& name, std::vector<Value*> in, std::map<std::string, Attribute> attrs = {}) {
  Node* n = g.add_node(name, std::move(in), 1, std::move(attrs));
  return n->outputs[0];
}

}  // namespace

std::unique_ptr<Model> build_demo_model(uint64_t seed) {
  auto m = std::make_unique<Model>();
  m->opsets[""] = 17;
  m->producer_name = "tessel demo";
  Graph& g = *m->graph;
  g.name = "demo_cnn";
  SplitMix64 rng(seed);

  constexpr int64_t kC = 3, kHW = 16, kF = 8, kClasses = 10;
  Value* x = g.add_input("image", Type::tensor(DType::F32, {1, kC, kHW, kHW}));
  Value* w1 = g.add_initializer("conv.weight", weights({kF, kC, 3, 3}, kC * 9, rng));
  Value* b1 = g.add_initializer("conv.bias", weights({kF}, kC * 9, rng));
  Value* w2 = g.add_initializer("fc.weight", weights({kClasses, kF * (kHW / 2) * (kHW / 2)}, kF * 64, rng));
  Value* b2 = g.add_initializer("fc.bias", weights({kClasses}, kF * 64, rng));

  Value* y = op(g, "Conv", {x, w1, b1},
                {{"kernel_shape", Attribute::of_ints({3, 3})}, {"pads", Attribute::of_ints({1, 1, 1, 1})}});
  y = op(g, "Relu", {y});
  y = op(g, "MaxPool", {y}, {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}});
  y = op(g, "Flatten", {y}, {{"axis", Attribute::of_int(1)}});
  y = op(g, "Gemm", {y, w2, b2}, {{"transB", Attribute::of_int(1)}});
  Value* probs = g.add_value("probs", Type::tensor(DType::F32, {1, kClasses}));
  g.add_node_with_outputs("Softmax", {y}, {probs}, {{"axis", Attribute::of_int(-1)}});
  g.outputs.push_back(probs);
  return m;
}

}  // namespace tessel
