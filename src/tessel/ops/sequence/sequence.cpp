// Sequences and optionals: SequenceEmpty/Construct/At/Insert/Erase/Length,
// SplitToSequence, ConcatFromSequence, SequenceMap, Optional,
// OptionalHasElement, OptionalGetElement.
//
// At run time a sequence is an RtValue of kind Sequence; an optional holding
// a value is that value itself, and an empty optional is an RtValue of kind
// None (it keeps the element type).
#include <algorithm>

#include "tessel/ops/common.h"
#include "tessel/ops/control/control_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

using ctl::fresh_dim;

// ---- helpers ---------------------------------------------------------------------

// The element type of a sequence input (unknown tensor when not yet known).
Type seq_elem_type(const InferContext& ctx, size_t i) {
  const Type& t = ctx.input_type(i);
  TS_CHECK(t.kind == Type::Kind::Sequence, ctx.node.describe(), ": input ", i, " must be a sequence, got ", t.str());
  return t.elem ? *t.elem : Type{};
}

const std::vector<Tensor>& seq_input(const KernelContext& ctx, size_t i) {
  const RtValue& v = ctx.input_value(i);
  TS_CHECK(v.kind == RtValue::Kind::Sequence, ctx.node.describe(), ": input ", i, " must be a sequence");
  return v.seq;
}

Type elem_type_of(const RtValue& v) {
  if (!v.seq.empty()) return Type::tensor_unknown_shape(v.seq[0].dtype());
  return v.elem_type;
}

// Normalises a sequence position into [0, n) (or [0, n] when `allow_end`).
int64_t seq_position(const Tensor& p, int64_t n, bool allow_end, const Node& node) {
  TS_CHECK(p.dtype() == DType::I32 || p.dtype() == DType::I64, node.describe(),
           ": position must be int32 or int64, got ", dtype_name(p.dtype()));
  const int64_t pos = ctl::read_int_scalar(p, node, "position");
  const int64_t hi = allow_end ? n : n - 1;
  TS_CHECK(pos >= -n && pos <= hi, node.describe(), ": position ", pos, " is out of range for a sequence of ", n,
           " tensors");
  return pos < 0 ? pos + n : pos;
}

void check_position_type(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return;
  const Type& t = ctx.input_type(i);
  TS_CHECK(t.is_tensor() && (t.dtype == DType::I32 || t.dtype == DType::I64 || t.dtype == DType::Undefined),
           ctx.node.describe(), ": position must be an int32 or int64 tensor, got ", t.str());
  // Exporters also write a one-element 1-D tensor.
  if (t.shape)
    TS_CHECK(t.shape->empty() || (t.shape->size() == 1 && (*t.shape)[0] == Dim(1)), ctx.node.describe(),
             ": position must be a scalar, got ", t.str());
}

void check_same_dtype(const Node& n, DType a, DType b) {
  TS_CHECK(a == DType::Undefined || b == DType::Undefined || a == b, n.describe(), ": tensor of dtype ",
           dtype_name(b), " does not match the sequence's ", dtype_name(a));
}

// ---- SequenceEmpty / SequenceConstruct / SequenceLength ------------------------

DType sequence_empty_dtype(const Node& n) {
  DType dt;
  const int64_t code = n.attr_int("dtype", static_cast<int64_t>(DType::F32));
  TS_CHECK(dtype_from_onnx(static_cast<int>(code), &dt) && code == static_cast<int>(code), n.describe(),
           ": unsupported dtype ", code);
  return dt;
}

void infer_sequence_empty(InferContext& ctx) {
  ctx.set_output_type(0, Type::sequence(Type::tensor_unknown_shape(sequence_empty_dtype(ctx.node))));
}

void kernel_sequence_empty(KernelContext& ctx) {
  ctx.set_output_value(0, RtValue::sequence({}, Type::tensor_unknown_shape(sequence_empty_dtype(ctx.node))));
}

void infer_sequence_construct(InferContext& ctx) {
  Type elem = ctx.input_type(0);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Type& t = ctx.input_type(i);
    TS_CHECK(t.is_tensor(), ctx.node.describe(), ": input ", i, " must be a tensor, got ", t.str());
    if (i) elem = ctl::merge_types(elem, t, ctx.node, 0);
  }
  ctx.set_output_type(0, Type::sequence(elem));
}

void kernel_sequence_construct(KernelContext& ctx) {
  std::vector<Tensor> s;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (!s.empty()) check_same_dtype(ctx.node, s[0].dtype(), t.dtype());
    s.push_back(t);
  }
  Type elem = Type::tensor_unknown_shape(s.at(0).dtype());
  ctx.set_output_value(0, RtValue::sequence(std::move(s), elem));
}

void infer_sequence_length(InferContext& ctx) {
  seq_elem_type(ctx, 0);
  ctx.set_output(0, DType::I64, {});
}

void kernel_sequence_length(KernelContext& ctx) {
  ctx.set_output(0, Tensor::scalar_i64(static_cast<int64_t>(seq_input(ctx, 0).size())));
}

// ---- SequenceAt / SequenceInsert / SequenceErase -------------------------------

void infer_sequence_at(InferContext& ctx) {
  Type elem = seq_elem_type(ctx, 0);
  check_position_type(ctx, 1);
  ctx.set_output_type(0, elem);
}

void kernel_sequence_at(KernelContext& ctx) {
  const auto& s = seq_input(ctx, 0);
  const int64_t pos = seq_position(ctx.input(1), static_cast<int64_t>(s.size()), false, ctx.node);
  ctx.set_output(0, s[static_cast<size_t>(pos)]);
}

void infer_sequence_insert(InferContext& ctx) {
  Type elem = seq_elem_type(ctx, 0);
  const Type& t = ctx.input_type(1);
  TS_CHECK(t.is_tensor(), ctx.node.describe(), ": input 1 must be a tensor, got ", t.str());
  check_same_dtype(ctx.node, elem.dtype, t.dtype);
  check_position_type(ctx, 2);
  // An empty sequence's element type only knows the dtype.
  const Type merged = elem.dtype == DType::Undefined && !elem.shape ? t : ctl::merge_types(elem, t, ctx.node, 0);
  ctx.set_output_type(0, Type::sequence(merged));
}

void kernel_sequence_insert(KernelContext& ctx) {
  const RtValue& in = ctx.input_value(0);
  std::vector<Tensor> s = seq_input(ctx, 0);
  const Tensor& t = ctx.input(1);
  const Type elem = elem_type_of(in);
  check_same_dtype(ctx.node, elem.dtype, t.dtype());
  int64_t pos = static_cast<int64_t>(s.size());
  if (ctx.has_input(2)) pos = seq_position(ctx.input(2), static_cast<int64_t>(s.size()), true, ctx.node);
  s.insert(s.begin() + pos, t);
  ctx.set_output_value(0, RtValue::sequence(std::move(s), Type::tensor_unknown_shape(t.dtype())));
}

void infer_sequence_erase(InferContext& ctx) {
  ctx.set_output_type(0, Type::sequence(seq_elem_type(ctx, 0)));
  check_position_type(ctx, 1);
}

void kernel_sequence_erase(KernelContext& ctx) {
  const RtValue& in = ctx.input_value(0);
  std::vector<Tensor> s = seq_input(ctx, 0);
  const int64_t n = static_cast<int64_t>(s.size());
  TS_CHECK(n > 0, ctx.node.describe(), ": cannot erase from an empty sequence");
  int64_t pos = n - 1;
  if (ctx.has_input(1)) pos = seq_position(ctx.input(1), n, false, ctx.node);
  s.erase(s.begin() + pos);
  ctx.set_output_value(0, RtValue::sequence(std::move(s), elem_type_of(in)));
}

// ---- SplitToSequence -------------------------------------------------------------

// Lengths of the parts along an axis of size `dim`, from the optional split
// input (scalar: chunks of that size, the last possibly smaller; 1-D: the
// lengths themselves; absent: chunks of 1).
std::vector<int64_t> split_lengths(const Tensor* split, int64_t dim, const Node& n) {
  if (!split) return std::vector<int64_t>(static_cast<size_t>(dim), 1);
  TS_CHECK(split->dtype() == DType::I32 || split->dtype() == DType::I64, n.describe(),
           ": split must be int32 or int64, got ", dtype_name(split->dtype()));
  TS_CHECK(split->rank() <= 1, n.describe(), ": split must be a scalar or 1-D, got shape ", dims_str(split->shape()));
  std::vector<int64_t> lens;
  if (split->rank() == 0) {
    const int64_t c = split->get_i64(0);
    TS_CHECK(c > 0, n.describe(), ": split must be positive, got ", c);
    for (int64_t at = 0; at < dim; at += c) lens.push_back(std::min(c, dim - at));
    return lens;
  }
  int64_t total = 0;
  for (int64_t i = 0; i < split->numel(); ++i) {
    const int64_t c = split->get_i64(i);
    TS_CHECK(c >= 0, n.describe(), ": split lengths must not be negative, got ", c);
    lens.push_back(c);
    total = checked_add(total, c);
  }
  TS_CHECK(total == dim, n.describe(), ": split lengths sum to ", total, " but the axis has size ", dim);
  return lens;
}

void infer_split_to_sequence(InferContext& ctx) {
  const Node& n = ctx.node;
  const DType dt = ctx.input_dtype(0);
  if (ctx.has_input(1)) {
    const DType s = ctx.input_dtype(1);
    TS_CHECK(s == DType::I32 || s == DType::I64 || s == DType::Undefined, n.describe(),
             ": split must be int32 or int64, got ", dtype_name(s));
  }
  if (!ctx.has_shape(0)) {
    ctx.set_output_type(0, Type::sequence(Type::tensor_unknown_shape(dt)));
    return;
  }
  Shape sh = ctx.input_shape(0);
  const int64_t axis = normalize_axis(n.attr_int("axis", 0), static_cast<int64_t>(sh.size()), n);
  if (!ctx.has_input(1)) {
    if (n.attr_int("keepdims", 1)) sh[static_cast<size_t>(axis)] = 1;
    else sh.erase(sh.begin() + axis);
    ctx.set_output_type(0, Type::sequence(Type::tensor(dt, sh)));
    return;
  }
  // The part length is known when every part has the same constant length.
  std::optional<Dim> len;
  if (const Tensor* c = ctx.input_const(1)) {
    const Dim& d = sh[static_cast<size_t>(axis)];
    if (d.is_const()) {
      std::vector<int64_t> lens = split_lengths(c, d.value(), n);
      if (!lens.empty() && std::all_of(lens.begin(), lens.end(), [&](int64_t v) { return v == lens[0]; }))
        len = lens[0];
    } else if (c->rank() == 1 && c->numel() > 0) {
      bool same = true;
      for (int64_t i = 1; i < c->numel(); ++i) same = same && c->get_i64(i) == c->get_i64(0);
      if (same) len = c->get_i64(0);
    }
  }
  sh[static_cast<size_t>(axis)] = len ? *len : fresh_dim(n, 0, "part");
  ctx.set_output_type(0, Type::sequence(Type::tensor(dt, sh)));
}

void kernel_split_to_sequence(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  TS_CHECK(x.rank() >= 1, n.describe(), ": input must have rank >= 1");
  const int64_t axis = normalize_axis(n.attr_int("axis", 0), static_cast<int64_t>(x.rank()), n);
  const int64_t dim = x.shape()[static_cast<size_t>(axis)];
  const Tensor* split = ctx.has_input(1) ? &ctx.input(1) : nullptr;
  const bool squeeze = !split && n.attr_int("keepdims", 1) == 0;
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (int64_t len : split_lengths(split, dim, n)) {
    parts.push_back(squeeze ? ctl::slice_at(x, axis, at) : ctl::slice_range(x, axis, at, at + len));
    at += len;
  }
  ctx.set_output_value(0, RtValue::sequence(std::move(parts), Type::tensor_unknown_shape(x.dtype())));
}

// ---- ConcatFromSequence ------------------------------------------------------------

void infer_concat_from_sequence(InferContext& ctx) {
  const Node& n = ctx.node;
  const Type elem = seq_elem_type(ctx, 0);
  TS_CHECK(n.has_attr("axis"), n.describe(), ": attribute 'axis' is required");
  const bool new_axis = n.attr_int("new_axis", 0) != 0;
  if (!elem.shape) {
    ctx.set_output_unknown_shape(0, elem.dtype);
    return;
  }
  Shape sh = *elem.shape;
  const int64_t rank = static_cast<int64_t>(sh.size());
  const int64_t axis = normalize_axis(n.attr_int("axis", 0), new_axis ? rank + 1 : rank, n);
  // The number of elements (and so the concatenated length) is a run-time value.
  if (new_axis) sh.insert(sh.begin() + axis, fresh_dim(n, 0, "count"));
  else sh[static_cast<size_t>(axis)] = fresh_dim(n, 0, "concat");
  ctx.set_output(0, elem.dtype, sh);
}

void kernel_concat_from_sequence(KernelContext& ctx) {
  const Node& n = ctx.node;
  const auto& s = seq_input(ctx, 0);
  TS_CHECK(!s.empty(), n.describe(), ": cannot concatenate an empty sequence");
  TS_CHECK(n.has_attr("axis"), n.describe(), ": attribute 'axis' is required");
  const bool new_axis = n.attr_int("new_axis", 0) != 0;
  const int64_t rank = static_cast<int64_t>(s[0].rank());
  const int64_t axis = normalize_axis(n.attr_int("axis", 0), new_axis ? rank + 1 : rank, n);
  ctx.set_output(0, new_axis ? ctl::stack(s, axis, n) : ctl::concat(s, axis, n));
}

// ---- SequenceMap -----------------------------------------------------------------

void check_sequence_map(const Node& n, const Graph& body) {
  TS_CHECK(body.inputs.size() == n.inputs.size(), n.describe(), ": body has ", body.inputs.size(),
           " inputs, the node ", n.inputs.size());
  TS_CHECK(body.outputs.size() == n.outputs.size(), n.describe(), ": body has ", body.outputs.size(),
           " outputs, the node ", n.outputs.size());
}

void infer_sequence_map(InferContext& ctx) {
  const Node& n = ctx.node;
  Graph& body = n.attr_graph("body");
  check_sequence_map(n, body);
  std::vector<Type> in;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Type& t = ctx.input_type(i);
    TS_CHECK(i > 0 || t.kind == Type::Kind::Sequence, n.describe(), ": input 0 must be a sequence, got ", t.str());
    in.push_back(t.kind == Type::Kind::Sequence ? (t.elem ? *t.elem : Type{}) : t);
  }
  std::vector<Type> out = ctl::subgraph_output_types(ctx, body, in);
  TS_CHECK(out.size() == n.outputs.size(), n.describe(), ": body inference gave ", out.size(), " outputs");
  for (size_t i = 0; i < out.size(); ++i) ctx.set_output_type(i, Type::sequence(out[i]));
}

void kernel_sequence_map(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Graph& body = n.attr_graph("body");
  check_sequence_map(n, body);
  const size_t count = seq_input(ctx, 0).size();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const RtValue& v = ctx.input_value(i);
    TS_CHECK(v.kind != RtValue::Kind::None, n.describe(), ": input ", i, " is an empty optional");
    if (v.kind == RtValue::Kind::Sequence)
      TS_CHECK(v.seq.size() == count, n.describe(), ": input ", i, " has ", v.seq.size(),
               " elements, the first sequence ", count);
  }
  std::vector<std::vector<Tensor>> outs(n.outputs.size());
  std::vector<RtValue> in(ctx.num_inputs());
  for (size_t k = 0; k < count; ++k) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const RtValue& v = ctx.input_value(i);
      in[i] = v.kind == RtValue::Kind::Sequence ? RtValue(v.seq[k]) : v;
    }
    std::vector<RtValue> out = ctx.run_subgraph(body, in);
    TS_CHECK(out.size() == outs.size(), n.describe(), ": body produced ", out.size(), " outputs");
    for (size_t o = 0; o < out.size(); ++o) {
      TS_CHECK(out[o].is_tensor(), n.describe(), ": body output ", o, " must be a tensor");
      outs[o].push_back(std::move(out[o].tensor));
    }
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    Type elem = body.outputs[o]->type;
    if (!outs[o].empty()) elem = Type::tensor_unknown_shape(outs[o][0].dtype());
    ctx.set_output_value(o, RtValue::sequence(std::move(outs[o]), elem));
  }
}

// ---- Optional ----------------------------------------------------------------------

void infer_optional(InferContext& ctx) {
  const Node& n = ctx.node;
  if (ctx.has_input(0)) {
    ctx.set_output_type(0, Type::optional(ctx.input_type(0)));
    return;
  }
  TS_CHECK(n.has_attr("type"), n.describe(), ": an Optional without input needs the 'type' attribute");
  ctx.set_output_type(0, Type::optional(n.attr("type", Attribute::Kind::TypeProto).type));
}

void kernel_optional(KernelContext& ctx) {
  const Node& n = ctx.node;
  if (ctx.has_input(0)) {
    TS_CHECK(ctx.input_value(0).kind != RtValue::Kind::None, n.describe(), ": input must not be an empty optional");
    ctx.set_output_value(0, ctx.input_value(0));
    return;
  }
  TS_CHECK(n.has_attr("type"), n.describe(), ": an Optional without input needs the 'type' attribute");
  ctx.set_output_value(0, RtValue::none(n.attr("type", Attribute::Kind::TypeProto).type));
}

void infer_optional_has_element(InferContext& ctx) { ctx.set_output(0, DType::Bool, {}); }

void kernel_optional_has_element(KernelContext& ctx) {
  const bool has = ctx.has_input(0) && ctx.input_value(0).kind != RtValue::Kind::None;
  ctx.set_output(0, ctl::scalar_bool(has));
}

void infer_optional_get_element(InferContext& ctx) {
  const Type& t = ctx.input_type(0);
  if (t.kind == Type::Kind::Optional) {
    ctx.set_output_type(0, t.elem ? *t.elem : Type{});
    return;
  }
  ctx.set_output_type(0, t);
}

void kernel_optional_get_element(KernelContext& ctx) {
  const RtValue& v = ctx.input_value(0);
  TS_CHECK(v.kind != RtValue::Kind::None, ctx.node.describe(), ": the optional input is empty");
  ctx.set_output_value(0, v);
}

}  // namespace

void register_sequence_ops(OpRegistry& r) {
  r.add(OpSchema{"SequenceEmpty", "", 0, 0, 1, 1, infer_sequence_empty, kernel_sequence_empty, nullptr, 11});
  r.add(OpSchema{"SequenceConstruct", "", 1, -1, 1, 1, infer_sequence_construct, kernel_sequence_construct,
                 nullptr, 11});
  r.add(OpSchema{"SequenceLength", "", 1, 1, 1, 1, infer_sequence_length, kernel_sequence_length, nullptr, 11});
  r.add(OpSchema{"SequenceAt", "", 2, 2, 1, 1, infer_sequence_at, kernel_sequence_at, nullptr, 11});
  r.add(OpSchema{"SequenceInsert", "", 2, 3, 1, 1, infer_sequence_insert, kernel_sequence_insert, nullptr, 11});
  r.add(OpSchema{"SequenceErase", "", 1, 2, 1, 1, infer_sequence_erase, kernel_sequence_erase, nullptr, 11});
  r.add(OpSchema{"SplitToSequence", "", 1, 2, 1, 1, infer_split_to_sequence, kernel_split_to_sequence, nullptr,
                 11});
  r.add(OpSchema{"ConcatFromSequence", "", 1, 1, 1, 1, infer_concat_from_sequence, kernel_concat_from_sequence,
                 nullptr, 11});
  r.add(OpSchema{"SequenceMap", "", 1, -1, 1, -1, infer_sequence_map, kernel_sequence_map, nullptr, 17});
  r.add(OpSchema{"Optional", "", 0, 1, 1, 1, infer_optional, kernel_optional, nullptr, 15});
  r.add(OpSchema{"OptionalHasElement", "", 0, 1, 1, 1, infer_optional_has_element, kernel_optional_has_element,
                 nullptr, 15});
  r.add(OpSchema{"OptionalGetElement", "", 1, 1, 1, 1, infer_optional_get_element, kernel_optional_get_element,
                 nullptr, 15});
}

}  // namespace tessel
