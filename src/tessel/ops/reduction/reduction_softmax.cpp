// Softmax, LogSoftmax and Hardmax along one axis (opset 13 semantics).
//
// Before opset 13 these ops flattened the input to 2-D at `axis` (default 1)
// and normalised each row; `upgrade` rewrites that as
// Flatten(axis) -> op(axis=-1) -> Reshape(Shape(x)), or simply sets the axis
// when the input's rank is known and the axis is the last one.
#include <cmath>
#include <iterator>

#include "tessel/ops/math_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

using namespace mathops;

enum class SoftKind { Softmax, LogSoftmax, Hardmax };

// Normalises every line of `x` along the axis described by `s`.
void soft_lines(SoftKind k, std::vector<double>& x, const AxisSplit& s) {
  std::vector<double> line(static_cast<size_t>(s.n));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      double* base = x.data() + o * s.n * s.inner + i;
      for (int64_t k2 = 0; k2 < s.n; ++k2) line[k2] = base[k2 * s.inner];
      if (k == SoftKind::Hardmax) {
        // One-hot at the first maximum (first NaN wins, as numpy's argmax).
        int64_t best = 0;
        for (int64_t j = 1; j < s.n; ++j)
          if (!std::isnan(line[best]) && (std::isnan(line[j]) || line[j] > line[best])) best = j;
        for (int64_t j = 0; j < s.n; ++j) base[j * s.inner] = j == best ? 1.0 : 0.0;
        continue;
      }
      double m = -INFINITY;
      for (double v : line) m = std::fmax(m, v);
      double sum = 0;
      for (double v : line) sum += std::exp(v - m);
      if (k == SoftKind::Softmax) {
        for (int64_t j = 0; j < s.n; ++j) base[j * s.inner] = std::exp(line[j] - m) / sum;
      } else {
        const double lse = std::log(sum);
        for (int64_t j = 0; j < s.n; ++j) base[j * s.inner] = line[j] - m - lse;
      }
    }
}

template <SoftKind K>
void soft_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_dtype(n, 0, x.dtype(), kFloatTypes);
  const int64_t axis = normalize_axis(n.attr_int("axis", -1), static_cast<int64_t>(x.rank()), n);
  std::vector<double> v = to_doubles(x);
  soft_lines(K, v, split_at_axis(x.shape(), axis));
  c.set_output(0, tensor_from_doubles(x.dtype(), x.shape(), v));
}

void soft_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, kFloatTypes);
  if (!c.has_shape(0)) {
    c.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = c.input_shape(0);
  normalize_axis(n.attr_int("axis", -1), static_cast<int64_t>(s.size()), n);
  c.set_output(0, dt, s);
}

// Pre-13 "coerce to 2-D" semantics, see the file comment.
void soft_upgrade(Node& n, int64_t opset) {
  if (opset >= 13) return;
  const int64_t axis = n.attr_int("axis", 1);
  Value* x = n.input(0);
  TS_CHECK(x && n.owner && !n.outputs.empty() && n.outputs[0], n.describe(), ": malformed node");
  if (x->type.has_shape()) {
    const int64_t rank = static_cast<int64_t>(x->type.shape->size());
    if (normalize_axis(axis, rank, n) == rank - 1) {
      n.attrs["axis"] = Attribute::of_int(-1);
      return;
    }
  }
  Graph& g = *n.owner;
  Node* shape = g.insert_node_before(&n, "Shape", {x}, 1);
  Node* flat = g.insert_node_before(&n, "Flatten", {x}, 1, {{"axis", Attribute::of_int(axis)}});
  n.inputs[0] = flat->outputs[0];
  n.attrs["axis"] = Attribute::of_int(-1);

  // The Reshape goes right after `n` and takes over n's output value, so that
  // every consumer (and graph outputs) keep reading the same Value.
  auto& nodes = g.nodes();
  auto it = std::find_if(nodes.begin(), nodes.end(), [&](const auto& p) { return p.get() == &n; });
  TS_CHECK(it != nodes.end(), n.describe(), ": node is not in its graph");
  ++it;
  Node* rs = it == nodes.end() ? g.add_node("Reshape", {nullptr, shape->outputs[0]}, 1)
                               : g.insert_node_before(it->get(), "Reshape", {nullptr, shape->outputs[0]}, 1);
  Value* y = n.outputs[0];
  Value* t = rs->outputs[0];
  n.outputs[0] = t;
  t->producer = &n;
  t->producer_output = 0;
  rs->inputs[0] = t;
  rs->outputs[0] = y;
  y->producer = rs;
  y->producer_output = 0;
}

OpSchema soft_schema(const char* name, KernelFn k) {
  OpSchema s;
  s.name = name;
  s.min_inputs = s.max_inputs = 1;
  s.infer = soft_infer;
  s.kernel = k;
  s.upgrade = soft_upgrade;
  return s;
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  r.add(soft_schema("Softmax", soft_kernel<SoftKind::Softmax>));
  r.add(soft_schema("LogSoftmax", soft_kernel<SoftKind::LogSoftmax>));
  r.add(soft_schema("Hardmax", soft_kernel<SoftKind::Hardmax>));
}

}  // namespace tessel
