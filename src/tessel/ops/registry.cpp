#include "tessel/ops/registry.h"

#include "tessel/support/error.h"

namespace tessel {

RtValue RtValue::sequence(std::vector<Tensor> s, Type elem) {
  RtValue v;
  v.kind = Kind::Sequence;
  v.seq = std::move(s);
  v.elem_type = std::move(elem);
  return v;
}

RtValue RtValue::none(Type elem) {
  RtValue v;
  v.kind = Kind::None;
  v.elem_type = std::move(elem);
  return v;
}

// ---- InferContext -------------------------------------------------------------

InferContext::InferContext(const Node& n)
    : node(n), out_types(n.outputs.size()), out_syms(n.outputs.size()) {}

const Type& InferContext::input_type(size_t i) const {
  TS_CHECK(has_input(i), node.describe(), ": input ", i, " is missing");
  return *in_types[i];
}

DType InferContext::input_dtype(size_t i) const { return input_type(i).dtype; }

const Shape& InferContext::input_shape(size_t i) const {
  const Type& t = input_type(i);
  TS_CHECK(t.has_shape(), node.describe(), ": input ", i, " has an unknown shape");
  return *t.shape;
}

std::optional<SymValue> InferContext::input_dims_value(size_t i) const {
  if (const SymValue* s = input_sym(i)) return *s;
  if (const Tensor* c = input_const(i)) {
    if (!is_int(c->dtype()) || c->rank() > 1) return std::nullopt;
    SymValue v;
    for (int64_t k = 0; k < c->numel(); ++k) v.push_back(c->get_i64(k));
    return v;
  }
  return std::nullopt;
}

void InferContext::set_output(size_t i, DType dt, Shape s) {
  TS_CHECK(i < out_types.size(), node.describe(), ": output ", i, " out of range");
  out_types[i] = Type::tensor(dt, std::move(s));
}

void InferContext::set_output_unknown_shape(size_t i, DType dt) {
  TS_CHECK(i < out_types.size(), node.describe(), ": output ", i, " out of range");
  out_types[i] = Type::tensor_unknown_shape(dt);
}

void InferContext::set_output_type(size_t i, Type t) {
  TS_CHECK(i < out_types.size(), node.describe(), ": output ", i, " out of range");
  out_types[i] = std::move(t);
}

void InferContext::set_output_sym(size_t i, SymValue v) {
  TS_CHECK(i < out_syms.size(), node.describe(), ": output ", i, " out of range");
  out_syms[i] = std::move(v);
}

// ---- KernelContext ------------------------------------------------------------

KernelContext::KernelContext(const Node& n) : node(n), outputs(n.outputs.size()) {}

const RtValue& KernelContext::input_value(size_t i) const {
  TS_CHECK(has_input(i), node.describe(), ": input ", i, " is missing");
  return *inputs[i];
}

const Tensor& KernelContext::input(size_t i) const {
  const RtValue& v = input_value(i);
  TS_CHECK(v.is_tensor(), node.describe(), ": input ", i, " is not a tensor");
  return v.tensor;
}

void KernelContext::set_output(size_t i, Tensor t) { set_output_value(i, RtValue(std::move(t))); }

void KernelContext::set_output_value(size_t i, RtValue v) {
  TS_CHECK(i < outputs.size(), node.describe(), ": output ", i, " out of range");
  outputs[i] = std::move(v);
}

// ---- registry -----------------------------------------------------------------

const OpRegistry& OpRegistry::global() {
  static const OpRegistry reg = [] {
    OpRegistry r;
    register_elementwise_ops(r);
    register_reduction_ops(r);
    register_matmul_ops(r);
    register_conv_ops(r);
    register_pool_ops(r);
    register_norm_ops(r);
    register_movement_ops(r);
    register_control_ops(r);
    register_sequence_ops(r);
    register_misc_ops(r);
    register_elementwise_lowerings(r);
    register_reduction_lowerings(r);
    register_movement_lowerings(r);
    register_matmul_lowerings(r);
    register_norm_lowerings(r);
    register_split_lowerings(r);
    register_pool_lowerings(r);
    register_conv_lowerings(r);
    register_loss_lowerings(r);
    register_attention_lowerings(r);
    register_layout_lowerings(r);
    register_quantize_lowerings(r);
    register_resize_lowerings(r);
    register_scatter_lowerings(r);
    register_grid_lowerings(r);
    register_signal_lowerings(r);
    register_im2col_op(r);
    register_tile_transform_op(r);
    register_blocked_layout_ops(r);
    register_unpack_panels_op(r);
    return r;
  }();
  return reg;
}

void OpRegistry::add(OpSchema s) {
  auto key = std::make_pair(s.domain, s.name);
  TS_CHECK(!ops_.count(key), "operator ", s.name, " registered twice");
  ops_.emplace(key, std::move(s));
}

void OpRegistry::set_lowering(const std::string& domain, const std::string& name, FusionKind kind, LowerFn fn) {
  auto it = ops_.find({domain, name});
  TS_CHECK(it != ops_.end(), "lowering for unregistered operator ", name);
  TS_CHECK(it->second.lower == nullptr, "operator ", name, " lowered twice");
  it->second.lower = fn;
  it->second.fusion = kind;
}

void OpRegistry::set_multi_output_lowering(const std::string& domain, const std::string& name) {
  auto it = ops_.find({domain, name});
  TS_CHECK(it != ops_.end() && it->second.lower, "multi-output lowering for ", name, " without a lowering");
  it->second.multi_output_lowering = true;
}

const OpSchema* OpRegistry::find(const std::string& domain, const std::string& name) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = ops_.find({d, name});
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<const OpSchema*> OpRegistry::all() const {
  std::vector<const OpSchema*> out;
  for (const auto& [k, s] : ops_) out.push_back(&s);
  return out;
}

void check_arity(const OpSchema& s, const Node& n) {
  // Trailing omitted inputs do not count.
  int ni = static_cast<int>(n.inputs.size());
  while (ni > 0 && !n.inputs[ni - 1]) --ni;
  int no = static_cast<int>(n.outputs.size());
  TS_CHECK(ni >= s.min_inputs && (s.max_inputs < 0 || ni <= s.max_inputs), n.describe(), ": expected ",
           s.min_inputs, (s.max_inputs < 0 ? " or more" : s.max_inputs == s.min_inputs ? "" : str_cat(" to ", s.max_inputs)),
           " inputs, got ", ni);
  TS_CHECK(no >= s.min_outputs && (s.max_outputs < 0 || no <= s.max_outputs), n.describe(), ": expected ",
           s.min_outputs, (s.max_outputs < 0 ? " or more" : s.max_outputs == s.min_outputs ? "" : str_cat(" to ", s.max_outputs)),
           " outputs, got ", no);
  for (int i = 0; i < s.min_inputs && i < ni; ++i)
    TS_CHECK(n.inputs[i] != nullptr, n.describe(), ": required input ", i, " is missing");
}

int64_t normalize_axis(int64_t axis, int64_t rank, const Node& n) {
  TS_CHECK(axis >= -rank && axis < rank, n.describe(), ": axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

}  // namespace tessel
