// Lower precision (--precision bf16|fp16): an f32 model rewritten to compute
// in bfloat16 or float16.
//
// Rewrites, in the main graph:
//   - a node that runs low reads bf16/fp16 versions of its f32 operands and
//     writes bf16/fp16 results. f32 constants it reads become converted
//     constants (once, here; finite values beyond the type's range saturate
//     to its largest finite value, so a mask of float32's lowest value stays
//     finite and 0 * mask stays 0); other f32 values go through a Cast.
//   - every value keeps its f32 version under its own name: a low node's
//     result is cast back up right after it, and f32 consumers read that.
//     Graph inputs and outputs so stay f32 (the user feeds and reads f32 and
//     compares with the f32 reference); Casts nobody reads are dead code.
//     Shape and Size read the low version (no Cast up for them).
//   - an identity Cast (f32 to f32) on a low value becomes a Cast to the low
//     type, so that an exporter's no-op Casts do not split the low chain.
//
// Which nodes run low:
//   - contractions (MatMul, Gemm, Conv, ConvTranspose, Einsum): always, when
//     their result is data (below). Their kernels accumulate in f32 (the
//     interpreter in double) and round once, so the low type costs one
//     rounding of each operand and one of the result, not one per term.
//   - elementwise and data-movement ops of kLowOps: when their result is
//     data and at least one of their non-constant operands is low already
//     (or a graph input). When all of them are f32 results of f32 nodes, the
//     node stays in f32: the chain that follows a statistic (llama's and
//     T5's RMSNorm: Pow -> ReduceMean -> Add eps -> Sqrt -> Reciprocal; the
//     x^3 term of GPT-2's GELU) continues in f32 until it meets low data.
//   - every other op stays f32, its operands cast up (exact). This is on
//     purpose for the statistics and range-sensitive ops: Softmax and
//     LogSoftmax (a sum of exps), LayerNormalization, Batch/Instance/Group/
//     RMS normalisation, Reduce* (sums over long rows: f32 accumulation is
//     not enough when the result itself is then rounded to fp16 and
//     re-used, and ReduceSum overflows fp16), Exp and Pow (exp(x) > 65504
//     for x > 11, x^2 > 65504 for |x| > 256 in fp16), Mul(x, x) (a square,
//     as Pow), comparisons (bool results, compared exactly), Cast (its type
//     is the op), integer and index ops, Shape/Size, ops with subgraphs, and
//     ops of other domains. Erf, Tanh and Sigmoid are bounded and run low
//     (their kernels evaluate in f32 and round once).
//
// Data: a value that reaches an f32 graph output through float operands
// (walking back from the outputs through the operands a low op would
// convert, and through every f32 operand of other ops). Float shape
// arithmetic (Shape -> Cast -> Div -> Floor -> Cast to int) that only feeds
// integers is not data and stays f32: bf16 is not exact beyond 256.
//
// Not converted: f64 and every non-f32 value; subgraphs (If/Loop/Scan
// bodies stay f32, reading the f32 versions of outer values).
//
// Assumes: types are inferred (runs after the first infer_shapes and folding
// rounds, so that folded shape arithmetic is gone). Folding, DCE and
// inference run again after it (pass_manager.cpp).
#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

constexpr uint32_t kAllOperands = ~0u;

// Ops that may run low, with the operands of their element type T (bit i =
// operand i): those are converted; other float operands (Resize's scales,
// Dropout's ratio) keep their type.
const std::unordered_map<std::string, uint32_t>& low_ops() {
  static const std::unordered_map<std::string, uint32_t> ops = {
      // contractions
      {"MatMul", kAllOperands}, {"Gemm", kAllOperands}, {"Conv", kAllOperands},
      {"ConvTranspose", kAllOperands}, {"Einsum", kAllOperands},
      // elementwise
      {"Add", kAllOperands}, {"Sub", kAllOperands}, {"Mul", kAllOperands}, {"Div", kAllOperands},
      {"Max", kAllOperands}, {"Min", kAllOperands}, {"Sum", kAllOperands}, {"Mean", kAllOperands},
      {"Abs", kAllOperands}, {"Neg", kAllOperands}, {"Sign", kAllOperands}, {"Relu", kAllOperands},
      {"LeakyRelu", kAllOperands}, {"PRelu", kAllOperands}, {"Elu", kAllOperands}, {"Selu", kAllOperands},
      {"Celu", kAllOperands}, {"Gelu", kAllOperands}, {"Erf", kAllOperands}, {"Tanh", kAllOperands},
      {"Sigmoid", kAllOperands}, {"HardSigmoid", kAllOperands}, {"HardSwish", kAllOperands},
      {"Softsign", kAllOperands}, {"Mish", kAllOperands}, {"Sqrt", kAllOperands}, {"Reciprocal", kAllOperands},
      {"Sin", kAllOperands}, {"Cos", kAllOperands}, {"Floor", kAllOperands}, {"Ceil", kAllOperands},
      {"Round", kAllOperands}, {"Clip", kAllOperands}, {"ThresholdedRelu", kAllOperands},
      {"Shrink", kAllOperands}, {"Where", 0b110}, {"Identity", kAllOperands}, {"Dropout", 0b1},
      // data movement
      {"Reshape", 0b1}, {"Transpose", kAllOperands}, {"Squeeze", 0b1}, {"Unsqueeze", 0b1},
      {"Flatten", kAllOperands}, {"Expand", 0b1}, {"Slice", 0b1}, {"Concat", kAllOperands}, {"Split", 0b1},
      {"Gather", 0b1}, {"GatherElements", 0b1}, {"GatherND", 0b1}, {"ScatterND", 0b101},
      {"ScatterElements", 0b101}, {"Pad", 0b101}, {"Tile", 0b1}, {"Trilu", 0b1}, {"DepthToSpace", kAllOperands},
      {"SpaceToDepth", kAllOperands}, {"Resize", 0b1},
      // pooling (window sums accumulate in f32 / double like the contractions)
      {"MaxPool", 0b1}, {"AveragePool", 0b1}, {"GlobalAveragePool", 0b1}, {"GlobalMaxPool", 0b1},
  };
  return ops;
}

bool is_contraction(const Node& n) {
  return n.op == "MatMul" || n.op == "Gemm" || n.op == "Conv" || n.op == "ConvTranspose" || n.op == "Einsum";
}

bool has_subgraph(const Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.kind == Attribute::Kind::Graph || a.kind == Attribute::Kind::Graphs) return true;
  return false;
}

bool is_f32(const Value* v) { return v && v->type.is_tensor() && v->type.dtype == DType::F32; }

bool is_identity_cast(const Node& n) {
  return n.op == "Cast" && is_f32(n.input(0)) && n.attr_int("to", 0) == static_cast<int64_t>(DType::F32);
}

// The operands of `n` that take its low type when it runs low (bit mask), or
// nullopt when the op never runs low.
std::optional<uint32_t> low_operands(const Node& n) {
  if (!n.domain.empty() || has_subgraph(n)) return std::nullopt;
  if (is_identity_cast(n)) return 0b1;
  auto it = low_ops().find(n.op);
  if (it == low_ops().end()) return std::nullopt;
  // A square overflows fp16 beyond 256, like Pow.
  if (n.op == "Mul" && n.num_inputs() == 2 && n.inputs[0] == n.inputs[1]) return std::nullopt;
  return it->second;
}

bool converts(uint32_t mask, size_t i) { return i < 32 && ((mask >> i) & 1u); }

// f32 bits to the low type, round to nearest even; finite values out of
// range saturate instead of becoming infinities.
Tensor convert_constant(const Tensor& t, DType low) {
  Tensor out(low, t.shape());
  const float* src = t.data<float>();
  uint16_t* dst = out.mutable_data<uint16_t>();
  const bool bf = low == DType::BF16;
  const uint16_t max_bits = bf ? 0x7F7F : 0x7BFF, inf_bits = bf ? 0x7F80 : 0x7C00;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = src[i];
    uint16_t b = bf ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
    if ((b & 0x7FFF) == inf_bits && std::isfinite(v)) b = static_cast<uint16_t>((b & 0x8000) | max_bits);
    dst[i] = b;
  }
  return out;
}

class LowerPrecision {
 public:
  LowerPrecision(Model& m, DType low) : g_(*m.graph), low_(low) {}

  bool run() {
    mark_data();
    std::vector<Node*> order;
    for (auto& n : g_.nodes()) order.push_back(n.get());
    for (Node* n : order) {
      if (runs_low(*n)) {
        rewrite_low(*n);
        continue;
      }
      // Shape and Size read no data: the low version, when there is one,
      // spares the Cast up.
      if ((n->op == "Shape" || n->op == "Size") && n->num_inputs() == 1) {
        auto it = low_of_.find(n->input(0));
        if (it != low_of_.end()) {
          n->inputs[0] = it->second;
          changed_ = true;
        }
      }
      for (Value* v : n->outputs)
        if (is_f32(v)) f32_native_.insert(v);
    }
    if (!changed_) return false;
    g_.topo_sort();
    return true;
  }

 private:
  Graph& g_;
  DType low_;
  bool changed_ = false;
  std::unordered_set<const Value*> data_;
  std::unordered_set<const Value*> f32_native_;  // f32 results of nodes that stayed f32
  std::unordered_map<const Value*, Value*> low_of_;

  void mark_data() {
    for (const Value* v : g_.outputs)
      if (is_f32(v)) data_.insert(v);
    for (auto it = g_.nodes().rbegin(); it != g_.nodes().rend(); ++it) {
      const Node& n = **it;
      bool data_out = false;
      for (const Value* v : n.outputs) data_out = data_out || (v && data_.count(v));
      if (!data_out) continue;
      const uint32_t mask = low_operands(n).value_or(kAllOperands);
      for (size_t i = 0; i < n.num_inputs(); ++i)
        if (is_f32(n.input(i)) && converts(mask, i)) data_.insert(n.input(i));
    }
  }

  bool runs_low(const Node& n) const {
    bool data_out = false;
    for (const Value* v : n.outputs) data_out = data_out || (is_f32(v) && data_.count(v));
    if (!data_out) return false;
    const std::optional<uint32_t> mask = low_operands(n);
    if (!mask) return false;
    if (is_contraction(n)) return true;
    // Stays f32 when every non-constant operand is an f32 result of an f32
    // node (the chain after a statistic).
    bool any = false, all_f32 = true;
    for (size_t i = 0; i < n.num_inputs(); ++i) {
      const Value* v = n.input(i);
      if (!is_f32(v) || !converts(*mask, i) || v->is_constant()) continue;
      any = true;
      all_f32 = all_f32 && f32_native_.count(v);
    }
    return !(any && all_f32);
  }

  Type low_type(const Value* v) const {
    Type t = v->type;
    t.dtype = low_;
    return t;
  }

  Attribute cast_to(DType t) const { return Attribute::of_int(static_cast<int64_t>(t)); }

  // The low version of an f32 value (made once).
  Value* low_of(Value* v) {
    auto it = low_of_.find(v);
    if (it != low_of_.end()) return it->second;
    Value* lv = nullptr;
    if (v->is_constant()) {
      lv = g_.add_initializer(g_.fresh_name(v->name + "_" + std::string(dtype_name(low_))),
                              convert_constant(*v->constant, low_));
    } else {
      lv = g_.add_value(g_.fresh_name(v->name + "_" + std::string(dtype_name(low_))), low_type(v));
      g_.add_node_with_outputs("Cast", {v}, {lv}, {{"to", cast_to(low_)}});
    }
    low_of_[v] = lv;
    return lv;
  }

  void rewrite_low(Node& n) {
    const uint32_t mask = *low_operands(n);
    for (size_t i = 0; i < n.num_inputs(); ++i)
      if (is_f32(n.input(i)) && converts(mask, i)) n.inputs[i] = low_of(n.inputs[i]);
    if (n.op == "Cast") n.attrs["to"] = cast_to(low_);  // an identity Cast
    // Each f32 result is now written low; the original value, under its own
    // name, becomes the Cast of it back to f32.
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Value* v = n.outputs[i];
      if (!is_f32(v)) continue;
      Value* lv = g_.add_value(g_.fresh_name(v->name + "_" + std::string(dtype_name(low_))), low_type(v));
      lv->producer = &n;
      lv->producer_output = static_cast<int>(i);
      n.outputs[i] = lv;
      v->producer = nullptr;
      v->producer_output = -1;
      g_.add_node_with_outputs("Cast", {lv}, {v}, {{"to", cast_to(DType::F32)}});
      low_of_[v] = lv;
    }
    changed_ = true;
  }
};

}  // namespace

bool lower_precision(Model& m, DType low) {
  TS_CHECK(low == DType::BF16 || low == DType::F16, "lower_precision: the low type must be bf16 or f16, got ",
           dtype_name(low));
  return LowerPrecision(m, low).run();
}

}  // namespace tessel
