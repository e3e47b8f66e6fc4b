#include "tessel/ops/control/control_util.h"

#include <cstring>

#include "tessel/support/error.h"

namespace tessel::ctl {

namespace {

// Copies `count` elements from src[src_off..] to dst[dst_off..]; both tensors
// have the same dtype. Strings are copied element by element, everything else
// as bytes.
void copy_elems(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off, int64_t count) {
  if (count <= 0) return;
  if (src.dtype() == DType::String) {
    const auto& s = src.strings();
    auto& d = dst.mutable_strings();
    for (int64_t i = 0; i < count; ++i) d[static_cast<size_t>(dst_off + i)] = s[static_cast<size_t>(src_off + i)];
    return;
  }
  const int64_t es = dtype_storage_size(src.dtype());
  std::memcpy(dst.mutable_raw() + dst_off * es, src.raw() + src_off * es, static_cast<size_t>(count * es));
}

// outer = product of dims before axis, inner = product after.
void split_dims(const std::vector<int64_t>& shape, int64_t axis, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int64_t i = 0; i < axis; ++i) *outer *= shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i) *inner *= shape[i];
}

}  // namespace

Tensor slice_range(const Tensor& t, int64_t axis, int64_t begin, int64_t end) {
  TS_CHECK(axis >= 0 && axis < static_cast<int64_t>(t.rank()), "slice: axis ", axis, " out of range for rank ",
           t.rank());
  const int64_t len = t.shape()[static_cast<size_t>(axis)];
  TS_CHECK(begin >= 0 && begin <= end && end <= len, "slice: range [", begin, ",", end, ") out of bounds for dim ",
           len);
  std::vector<int64_t> shape = t.shape();
  shape[static_cast<size_t>(axis)] = end - begin;
  Tensor out(t.dtype(), shape);
  int64_t outer, inner;
  split_dims(t.shape(), axis, &outer, &inner);
  const int64_t n = (end - begin) * inner;
  for (int64_t o = 0; o < outer; ++o) copy_elems(t, (o * len + begin) * inner, out, o * n, n);
  return out;
}

Tensor slice_at(const Tensor& t, int64_t axis, int64_t index) {
  Tensor s = slice_range(t, axis, index, index + 1);
  std::vector<int64_t> shape = t.shape();
  shape.erase(shape.begin() + axis);
  return s.reshaped(shape);
}

Tensor concat(const std::vector<Tensor>& parts, int64_t axis, const Node& n) {
  TS_CHECK(!parts.empty(), n.describe(), ": nothing to concatenate");
  const Tensor& first = parts[0];
  const int64_t rank = static_cast<int64_t>(first.rank());
  TS_CHECK(axis >= 0 && axis < rank, n.describe(), ": concat axis ", axis, " out of range for rank ", rank);
  std::vector<int64_t> shape = first.shape();
  int64_t total = 0;
  for (const Tensor& p : parts) {
    TS_CHECK(p.dtype() == first.dtype(), n.describe(), ": cannot concatenate ", dtype_name(p.dtype()), " with ",
             dtype_name(first.dtype()));
    TS_CHECK(static_cast<int64_t>(p.rank()) == rank, n.describe(), ": cannot concatenate shapes ",
             dims_str(first.shape()), " and ", dims_str(p.shape()));
    for (int64_t d = 0; d < rank; ++d)
      TS_CHECK(d == axis || p.shape()[static_cast<size_t>(d)] == shape[static_cast<size_t>(d)], n.describe(),
               ": cannot concatenate shapes ", dims_str(first.shape()), " and ", dims_str(p.shape()), " on axis ",
               axis);
    total = checked_add(total, p.shape()[static_cast<size_t>(axis)]);
  }
  shape[static_cast<size_t>(axis)] = total;
  Tensor out(first.dtype(), shape);
  int64_t outer, inner;
  split_dims(shape, axis, &outer, &inner);
  int64_t offset = 0;  // along the axis
  for (const Tensor& p : parts) {
    const int64_t len = p.shape()[static_cast<size_t>(axis)];
    for (int64_t o = 0; o < outer; ++o)
      copy_elems(p, o * len * inner, out, (o * total + offset) * inner, len * inner);
    offset += len;
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& parts, int64_t axis, const Node& n) {
  TS_CHECK(!parts.empty(), n.describe(), ": nothing to stack");
  const int64_t rank = static_cast<int64_t>(parts[0].rank());
  TS_CHECK(axis >= 0 && axis <= rank, n.describe(), ": stack axis ", axis, " out of range for rank ", rank);
  std::vector<Tensor> expanded;
  expanded.reserve(parts.size());
  for (const Tensor& p : parts) {
    TS_CHECK(p.shape() == parts[0].shape() && p.dtype() == parts[0].dtype(), n.describe(),
             ": values to stack differ: ", dtype_name(parts[0].dtype()), dims_str(parts[0].shape()), " vs ",
             dtype_name(p.dtype()), dims_str(p.shape()));
    std::vector<int64_t> s = p.shape();
    s.insert(s.begin() + axis, 1);
    expanded.push_back(p.reshaped(s));
  }
  return concat(expanded, axis, n);
}

Tensor scalar_bool(bool v) {
  Tensor t(DType::Bool, {});
  t.set_i64(0, v ? 1 : 0);
  return t;
}

bool read_bool_scalar(const Tensor& t, const Node& n, const char* what) {
  TS_CHECK(t.dtype() == DType::Bool, n.describe(), ": ", what, " must be bool, got ", dtype_name(t.dtype()));
  TS_CHECK(t.numel() == 1, n.describe(), ": ", what, " must have one element, got shape ", dims_str(t.shape()));
  return t.get_i64(0) != 0;
}

int64_t read_int_scalar(const Tensor& t, const Node& n, const char* what) {
  TS_CHECK(is_int(t.dtype()), n.describe(), ": ", what, " must be an integer, got ", dtype_name(t.dtype()));
  TS_CHECK(t.numel() == 1, n.describe(), ": ", what, " must have one element, got shape ", dims_str(t.shape()));
  return t.get_i64(0);
}

Dim fresh_dim(const Node& n, size_t out, const std::string& what) {
  std::string base;
  if (out < n.outputs.size() && n.outputs[out]) base = n.outputs[out]->name;
  else if (!n.name.empty()) base = n.name;
  else base = n.op;
  return Dim::sym(str_cat(base, "_", what));
}

namespace {
Type merge_rec(const Type& a, const Type& b, const Node& n, size_t out, int depth) {
  // A value that is optional on one path and present on the other is optional.
  if (a.kind == Type::Kind::Optional && b.kind != Type::Kind::Optional)
    return Type::optional(a.elem ? merge_rec(*a.elem, b, n, out, depth + 1) : b);
  if (b.kind == Type::Kind::Optional && a.kind != Type::Kind::Optional) return merge_rec(b, a, n, out, depth);
  TS_CHECK(a.kind == b.kind, n.describe(), ": output ", out, " has type ", a.str(), " on one path and ", b.str(),
           " on another");
  if (a.kind != Type::Kind::Tensor) {
    if (!a.elem) return b;
    if (!b.elem) return a;
    return a.kind == Type::Kind::Sequence ? Type::sequence(merge_rec(*a.elem, *b.elem, n, out, depth + 1))
                                          : Type::optional(merge_rec(*a.elem, *b.elem, n, out, depth + 1));
  }
  DType dt = a.dtype;
  if (dt == DType::Undefined) dt = b.dtype;
  TS_CHECK(b.dtype == DType::Undefined || b.dtype == dt, n.describe(), ": output ", out, " has dtype ",
           dtype_name(a.dtype), " on one path and ", dtype_name(b.dtype), " on another");
  if (!a.shape || !b.shape || a.shape->size() != b.shape->size()) return Type::tensor_unknown_shape(dt);
  Shape s = *a.shape;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != (*b.shape)[i]) s[i] = fresh_dim(n, out, str_cat(depth ? "e" : "", "d", i));
  return Type::tensor(dt, s);
}
}  // namespace

Type merge_types(const Type& a, const Type& b, const Node& n, size_t out) { return merge_rec(a, b, n, out, 0); }

std::vector<Type> subgraph_output_types(InferContext& ctx, Graph& g, const std::vector<Type>& in_types) {
  if (ctx.infer_subgraph) return ctx.infer_subgraph(g, in_types);
  std::vector<Type> out;
  for (const Value* v : g.outputs) out.push_back(v ? v->type : Type{});
  return out;
}

Tensor empty_like_type(const Type& t, int64_t leading, const Node& n) {
  TS_CHECK(t.kind == Type::Kind::Tensor, n.describe(), ": cannot build an empty scan output of type ", t.str());
  // Without a declared dtype any choice is a guess; float is what ONNX
  // runtimes produce for untyped empty tensors.
  const DType dt = t.dtype == DType::Undefined ? DType::F32 : t.dtype;
  std::vector<int64_t> shape{leading};
  if (t.shape)
    for (const Dim& d : *t.shape) shape.push_back(d.is_const() ? d.value() : 0);
  return Tensor(dt, shape);
}

}  // namespace tessel::ctl
