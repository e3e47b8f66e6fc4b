// Shape-manipulating operators: Constant, Identity, Shape, Size, Reshape,
// Flatten, Squeeze, Unsqueeze, Expand, ConstantOfShape, Range, EyeLike.
//
// These carry most of the symbolic shape arithmetic of exported models
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains), so their infer
// functions propagate values as Dims (out_syms) and consume shape inputs given
// as Dims, not only as constants.
#include <cmath>
#include <limits>

#include "tessel/ops/movement/movement_common.h"
#include "tessel/support/error.h"

namespace tessel::movement {
namespace {

// ---- Constant ------------------------------------------------------------------

// The value of a Constant node from whichever single value* attribute it has.
Tensor constant_value(const Node& n) {
  static const char* const kForms[] = {"value",     "sparse_value", "value_float",  "value_floats",
                                       "value_int", "value_ints",   "value_string", "value_strings"};
  const char* form = nullptr;
  for (const char* f : kForms) {
    if (!n.has_attr(f)) continue;
    TS_CHECK(!form, n.describe(), ": has both '", form, "' and '", f, "' attributes");
    form = f;
  }
  TS_CHECK(form, n.describe(), ": needs one of the value attributes");
  const std::string f = form;
  if (f == "value") return n.attr_tensor("value");
  if (f == "sparse_value") {
    // The importer densifies sparse tensors into a tensor attribute.
    return n.attr("sparse_value", Attribute::Kind::Tensor).t;
  }
  if (f == "value_float") {
    Tensor t(DType::F32, {});
    t.set_f64(0, n.attr_float("value_float", 0));
    return t;
  }
  if (f == "value_floats") {
    const std::vector<float> v = n.attr_floats("value_floats");
    return Tensor::from_f32({static_cast<int64_t>(v.size())}, v);
  }
  if (f == "value_int") return Tensor::scalar_i64(n.attr_int("value_int", 0));
  if (f == "value_ints") return Tensor::from_i64(n.attr_ints("value_ints"));
  if (f == "value_string") {
    Tensor t(DType::String, {});
    t.mutable_strings()[0] = n.attr_string("value_string", "");
    return t;
  }
  const std::vector<std::string> v = n.attr_strings("value_strings");
  Tensor t(DType::String, {static_cast<int64_t>(v.size())});
  t.mutable_strings() = v;
  return t;
}

// Symbolic value of a small integer tensor of rank <= 1, if it is one.
std::optional<SymValue> sym_of_tensor(const Tensor& t) {
  if (!is_int(t.dtype()) || t.rank() > 1 || t.numel() > static_cast<int64_t>(kMaxSymElements)) return std::nullopt;
  SymValue v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_i64(i));
  return v;
}

void constant_infer(InferContext& ctx) {
  const Tensor t = constant_value(ctx.node);
  ctx.set_output(0, t.dtype(), shape_of(t.shape()));
  if (auto s = sym_of_tensor(t)) ctx.set_output_sym(0, *s);
}

void constant_kernel(KernelContext& ctx) { ctx.set_output(0, constant_value(ctx.node)); }

// ---- Identity --------------------------------------------------------------------

void identity_infer(InferContext& ctx) {
  ctx.set_output_type(0, ctx.input_type(0));
  if (const SymValue* s = ctx.input_sym(0)) ctx.set_output_sym(0, *s);
}

// Identity forwards any value: tensor, sequence or optional.
void identity_kernel(KernelContext& ctx) { ctx.set_output_value(0, ctx.input_value(0)); }

// ---- Shape, Size --------------------------------------------------------------------

// The [start, end) range of dims Shape reports, clamped like ONNX does.
std::pair<int64_t, int64_t> shape_range(const Node& n, int64_t rank) {
  auto clamp_axis = [rank](int64_t a) {
    if (a < 0) a += rank;
    return std::clamp<int64_t>(a, 0, rank);
  };
  const int64_t start = clamp_axis(n.attr_int("start", 0));
  const int64_t end = n.has_attr("end") ? clamp_axis(n.attr_int("end", rank)) : rank;
  return {start, std::max(start, end)};
}

void shape_infer(InferContext& ctx) {
  if (!ctx.has_shape(0)) {
    ctx.set_output(0, DType::I64, fresh_shape(ctx, 0, 1));
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const auto [start, end] = shape_range(ctx.node, static_cast<int64_t>(s.size()));
  SymValue v(s.begin() + start, s.begin() + end);
  ctx.set_output(0, DType::I64, {Dim(end - start)});
  ctx.set_output_sym(0, std::move(v));
}

void shape_kernel(KernelContext& ctx) {
  const auto& dims = ctx.input(0).shape();
  const auto [start, end] = shape_range(ctx.node, static_cast<int64_t>(dims.size()));
  ctx.set_output(0, Tensor::from_i64(std::vector<int64_t>(dims.begin() + start, dims.begin() + end)));
}

void size_infer(InferContext& ctx) {
  ctx.set_output(0, DType::I64, {});
  if (ctx.has_shape(0)) ctx.set_output_sym(0, {num_elements(ctx.input_shape(0))});
}

void size_kernel(KernelContext& ctx) { ctx.set_output(0, Tensor::scalar_i64(ctx.input(0).numel())); }

// ---- Reshape -------------------------------------------------------------------------

// Resolves Reshape's target shape against the input dims: 0 copies the input
// dim (unless allowzero), -1 takes what is left.
std::vector<int64_t> reshape_dims(const Node& n, const std::vector<int64_t>& in, const std::vector<int64_t>& target,
                                  bool allowzero) {
  std::vector<int64_t> out(target.size());
  int infer_at = -1;
  int64_t known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t v = target[i];
    if (v == -1) {
      TS_CHECK(infer_at < 0, n.describe(), ": shape ", dims_str(target), " has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    TS_CHECK(v >= 0, n.describe(), ": invalid dimension ", v, " in shape ", dims_str(target));
    if (v == 0 && !allowzero) {
      TS_CHECK(i < in.size(), n.describe(), ": shape ", dims_str(target), " copies dimension ", i,
               " (0) but the input has rank ", in.size());
      v = in[i];
    }
    has_zero = has_zero || v == 0;
    out[i] = v;
    known = checked_mul(known, v);
  }
  const int64_t numel = checked_numel(in);
  if (infer_at >= 0) {
    TS_CHECK(!(allowzero && has_zero), n.describe(), ": shape ", dims_str(target),
             " has both 0 and -1 with allowzero=1");
    TS_CHECK(known != 0 && numel % known == 0, n.describe(), ": cannot reshape ", dims_str(in), " to ",
             dims_str(target));
    out[static_cast<size_t>(infer_at)] = numel / known;
  } else {
    TS_CHECK(known == numel, n.describe(), ": cannot reshape ", dims_str(in), " (", numel, " elements) to ",
             dims_str(target));
  }
  return out;
}

void reshape_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  const bool allowzero = ctx.node.attr_int("allowzero", 0) != 0;
  const auto target = ctx.input_dims_value(1);
  if (!target) {
    if (auto len = known_length(ctx, 1)) {
      ctx.set_output(0, dt, fresh_shape(ctx, 0, static_cast<size_t>(*len)));
    } else {
      ctx.set_output_unknown_shape(0, dt);
    }
    return;
  }
  const Shape* in = ctx.has_shape(0) ? &ctx.input_shape(0) : nullptr;
  Shape out(target->size());
  int infer_at = -1;
  Dim known = 1;
  for (size_t i = 0; i < target->size(); ++i) {
    Dim v = (*target)[i];
    if (v.is_const() && v.value() == -1) {
      TS_CHECK(infer_at < 0, ctx.node.describe(), ": shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    TS_CHECK(!v.is_const() || v.value() >= 0, ctx.node.describe(), ": invalid dimension ", v.str(), " in shape");
    if (v.is_const() && v.value() == 0 && !allowzero) {
      if (in) {
        TS_CHECK(i < in->size(), ctx.node.describe(), ": shape copies dimension ", i, " (0) but the input has rank ",
                 in->size());
        v = (*in)[i];
      } else {
        v = fresh_dim(ctx, 0, i);
      }
    }
    out[i] = v;
    known = known * v;
  }
  if (infer_at >= 0) {
    Dim rest = fresh_dim(ctx, 0, static_cast<size_t>(infer_at));
    if (in && !(known.is_const() && known.value() == 0)) rest = Dim::floordiv(num_elements(*in), known);
    out[static_cast<size_t>(infer_at)] = rest;
  }
  if (in) {
    const Dim n_in = num_elements(*in), n_out = num_elements(out);
    TS_CHECK(!(n_in.is_const() && n_out.is_const()) || n_in == n_out, ctx.node.describe(), ": cannot reshape ",
             shape_str(*in), " to ", shape_str(out));
  }
  ctx.set_output(0, dt, out);
  if (const SymValue* s = ctx.input_sym(0); s && out.size() <= 1) ctx.set_output_sym(0, *s);
}

void reshape_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& shape = ctx.input(1);
  TS_CHECK(shape.rank() == 1, ctx.node.describe(), ": shape must be 1-D, got ", dims_str(shape.shape()));
  const auto target = int_values(shape, ctx.node, "shape");
  ctx.set_output(0, x.reshaped(reshape_dims(ctx.node, x.shape(), target, ctx.node.attr_int("allowzero", 0) != 0)));
}

// Opset < 5 took the shape as an attribute.
void reshape_upgrade(Node& n, int64_t opset) {
  if (opset >= 5) return;
  n.attrs.erase("consumed_inputs");
  attr_to_input(n, "shape", 1);
}

// ---- Flatten ---------------------------------------------------------------------------

int64_t flatten_axis(const Node& n, int64_t rank) {
  const int64_t a = n.attr_int("axis", 1);
  TS_CHECK(a >= -rank && a <= rank, n.describe(), ": axis ", a, " is out of range for rank ", rank);
  return a < 0 ? a + rank : a;
}

void flatten_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  if (!ctx.has_shape(0)) {
    ctx.set_output(0, dt, fresh_shape(ctx, 0, 2));
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const int64_t a = flatten_axis(ctx.node, static_cast<int64_t>(s.size()));
  ctx.set_output(0, dt, {num_elements(Shape(s.begin(), s.begin() + a)), num_elements(Shape(s.begin() + a, s.end()))});
}

void flatten_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t a = flatten_axis(ctx.node, static_cast<int64_t>(x.rank()));
  std::vector<int64_t> lo(x.shape().begin(), x.shape().begin() + a), hi(x.shape().begin() + a, x.shape().end());
  ctx.set_output(0, x.reshaped({checked_numel(lo), checked_numel(hi)}));
}

// ---- Squeeze, Unsqueeze -------------------------------------------------------------------

// Opset < 13 took axes as an attribute.
void axes_attr_upgrade(Node& n, int64_t opset) {
  if (opset < 13) attr_to_input(n, "axes", 1);
}

void squeeze_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const int64_t r = static_cast<int64_t>(s.size());
  std::vector<bool> drop(s.size(), false);
  if (ctx.has_input(1)) {
    auto axes = const_ints(ctx, 1);
    if (!axes) {
      ctx.set_output_unknown_shape(0, dt);
      return;
    }
    for (int64_t a : normalize_axes(*axes, r, ctx.node)) {
      const Dim& d = s[static_cast<size_t>(a)];
      if (d.is_const() && d.value() != 1) {
        // Squeezing a non-1 dim fails at run time (the kernel reports it);
        // expanded functions contain such nodes in If branches that never
        // run for these shapes, so inference only gives up here.
        ctx.set_output_unknown_shape(0, dt);
        return;
      }
      drop[static_cast<size_t>(a)] = true;
    }
  } else {
    // Without axes every size-1 dim goes; a symbolic dim might be 1.
    for (size_t i = 0; i < s.size(); ++i) {
      if (!s[i].is_const()) {
        ctx.set_output_unknown_shape(0, dt);
        return;
      }
      drop[i] = s[i].value() == 1;
    }
  }
  Shape out;
  for (size_t i = 0; i < s.size(); ++i)
    if (!drop[i]) out.push_back(s[i]);
  const bool small = out.size() <= 1;
  ctx.set_output(0, dt, std::move(out));
  if (const SymValue* v = ctx.input_sym(0); v && small) ctx.set_output_sym(0, *v);
}

void squeeze_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& s = x.shape();
  std::vector<bool> drop(s.size(), false);
  if (ctx.has_input(1)) {
    for (int64_t a : normalize_axes(index_values(ctx.input(1), ctx.node, "axes"), static_cast<int64_t>(s.size()),
                                    ctx.node)) {
      TS_CHECK(s[static_cast<size_t>(a)] == 1, ctx.node.describe(), ": cannot squeeze axis ", a, " of size ",
               s[static_cast<size_t>(a)], " in shape ", dims_str(s));
      drop[static_cast<size_t>(a)] = true;
    }
  } else {
    for (size_t i = 0; i < s.size(); ++i) drop[i] = s[i] == 1;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < s.size(); ++i)
    if (!drop[i]) out.push_back(s[i]);
  ctx.set_output(0, x.reshaped(out));
}

// Output dims of Unsqueeze: axes index the output, whose rank is r + |axes|.
template <class D>
std::vector<D> unsqueeze_dims(const std::vector<D>& in, const std::vector<int64_t>& axes, const Node& n) {
  const int64_t out_rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> ins(static_cast<size_t>(out_rank), false);
  for (int64_t a : normalize_axes(axes, out_rank, n)) ins[static_cast<size_t>(a)] = true;
  std::vector<D> out;
  size_t k = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(ins[static_cast<size_t>(i)] ? D(1) : in[k++]);
  return out;
}

void unsqueeze_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  const auto axes = const_ints(ctx, 1);
  if (!ctx.has_shape(0) || !axes) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  Shape out = unsqueeze_dims(ctx.input_shape(0), *axes, ctx.node);
  const bool small = out.size() <= 1;
  ctx.set_output(0, dt, std::move(out));
  if (const SymValue* v = ctx.input_sym(0); v && small) ctx.set_output_sym(0, *v);
}

void unsqueeze_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto axes = index_values(ctx.input(1), ctx.node, "axes");
  ctx.set_output(0, x.reshaped(unsqueeze_dims(x.shape(), axes, ctx.node)));
}

// ---- Expand ------------------------------------------------------------------------------

void expand_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  const auto target = ctx.input_dims_value(1);
  if (!target || !ctx.has_shape(0)) {
    if (auto len = known_length(ctx, 1); len && ctx.has_shape(0)) {
      // The target is unknown, but an input dim that is a constant other
      // than 1 can only broadcast to itself.
      const Shape& in = ctx.input_shape(0);
      const size_t r = std::max(static_cast<size_t>(*len), in.size());
      Shape out = fresh_shape(ctx, 0, r);
      for (size_t i = 0; i < in.size(); ++i) {
        const Dim& d = in[i];
        if (d.is_const() && d.value() != 1) out[r - in.size() + i] = d;
      }
      ctx.set_output(0, dt, std::move(out));
    } else {
      ctx.set_output_unknown_shape(0, dt);
    }
    return;
  }
  const Shape& in = ctx.input_shape(0);
  Shape out = broadcast_shapes(in, *target, ctx.node);
  // Broadcast of a small symbolic value (e.g. a shape scalar expanded to [n]).
  if (const SymValue* v = ctx.input_sym(0); v && out.size() <= 1 && is_static(out)) {
    const int64_t n = out.empty() ? 1 : out[0].value();
    if (static_cast<int64_t>(v->size()) == n) {
      ctx.set_output_sym(0, *v);
    } else if (v->size() == 1 && n <= static_cast<int64_t>(kMaxSymElements)) {
      ctx.set_output_sym(0, SymValue(static_cast<size_t>(n), (*v)[0]));
    }
  }
  ctx.set_output(0, dt, std::move(out));
}

// Tables that read a tensor of `in` broadcast to `out` (stride 0 on the
// broadcast axes).
AxisTables broadcast_tables(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  const std::vector<int64_t> strides = strides_of(in);
  const size_t off = out.size() - in.size();
  AxisTables t(out.size());
  for (size_t d = 0; d < out.size(); ++d) {
    t[d].assign(static_cast<size_t>(out[d]), 0);
    if (d < off || in[d - off] == 1) continue;
    for (int64_t o = 0; o < out[d]; ++o) t[d][static_cast<size_t>(o)] = o * strides[d - off];
  }
  return t;
}

void expand_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& shape = ctx.input(1);
  TS_CHECK(shape.rank() == 1, ctx.node.describe(), ": shape must be 1-D, got ", dims_str(shape.shape()));
  const auto target = int_values(shape, ctx.node, "shape");
  for (int64_t v : target) TS_CHECK(v >= 0, ctx.node.describe(), ": invalid dimension ", v, " in shape");
  const auto out_dims = broadcast_dims(x.shape(), target, ctx.node);
  Tensor out(x.dtype(), out_dims);
  copy_box(x, broadcast_tables(x.shape(), out_dims), out, {}, out_dims);
  ctx.set_output(0, std::move(out));
}

// ---- ConstantOfShape ------------------------------------------------------------------------

Tensor constant_of_shape_value(const Node& n) {
  if (!n.has_attr("value")) return Tensor(DType::F32, {});
  const Tensor& v = n.attr_tensor("value");
  TS_CHECK(v.numel() == 1, n.describe(), ": value must hold exactly one element, got shape ", dims_str(v.shape()));
  return v;
}

void constant_of_shape_infer(InferContext& ctx) {
  check_index_input(ctx, 0, true);
  const Tensor v = constant_of_shape_value(ctx.node);
  const auto dims = ctx.input_dims_value(0);
  if (!dims) {
    if (auto len = known_length(ctx, 0)) {
      ctx.set_output(0, v.dtype(), fresh_shape(ctx, 0, static_cast<size_t>(*len)));
    } else {
      ctx.set_output_unknown_shape(0, v.dtype());
    }
    return;
  }
  for (const Dim& d : *dims)
    TS_CHECK(!d.is_const() || d.value() >= 0, ctx.node.describe(), ": negative dimension ", d.str());
  Shape out = *dims;
  if (is_int(v.dtype()) && out.size() <= 1 && is_static(out)) {
    const int64_t n = out.empty() ? 1 : out[0].value();
    if (n <= static_cast<int64_t>(kMaxSymElements)) ctx.set_output_sym(0, SymValue(static_cast<size_t>(n), v.get_i64(0)));
  }
  ctx.set_output(0, v.dtype(), std::move(out));
}

void constant_of_shape_kernel(KernelContext& ctx) {
  const Tensor& shape = ctx.input(0);
  TS_CHECK(shape.rank() == 1, ctx.node.describe(), ": input must be 1-D, got ", dims_str(shape.shape()));
  const auto dims = int_values(shape, ctx.node, "shape");
  const Tensor v = constant_of_shape_value(ctx.node);
  Tensor out(v.dtype(), dims);
  fill_with(out, v, 0);
  ctx.set_output(0, std::move(out));
}

// ---- Range ------------------------------------------------------------------------------------

bool range_dtype_ok(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::I16 || t == DType::I32 || t == DType::I64 ||
         t == DType::F16 || t == DType::BF16;
}

// Number of elements of Range(start, limit, delta) for integer inputs, exact.
int64_t range_count_int(int64_t start, int64_t limit, int64_t delta, const Node& n) {
  TS_CHECK(delta != 0, n.describe(), ": delta must not be zero");
  const __int128 span = static_cast<__int128>(limit) - start;
  __int128 q = span / delta;
  if (q * delta != span && ((span > 0) == (delta > 0))) ++q;  // ceil
  if (q < 0) q = 0;
  TS_CHECK(q <= Tensor::kMaxElements, n.describe(), ": range of ", static_cast<int64_t>(q), " elements is too large");
  return static_cast<int64_t>(q);
}

int64_t range_count_float(double start, double limit, double delta, const Node& n) {
  TS_CHECK(delta != 0 && std::isfinite(start) && std::isfinite(limit) && std::isfinite(delta), n.describe(),
           ": start, limit and delta must be finite and delta non-zero");
  const double q = std::ceil((limit - start) / delta);
  TS_CHECK(q <= static_cast<double>(Tensor::kMaxElements), n.describe(), ": range of ", q,
           " elements is too large");
  return q < 0 ? 0 : static_cast<int64_t>(q);
}

void range_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, range_dtype_ok, "float, double, int16, int32, int64, float16 or bfloat16");
  for (size_t i = 1; i < 3; ++i)
    TS_CHECK(ctx.input_dtype(i) == dt, ctx.node.describe(), ": input ", i, " has dtype ",
             dtype_name(ctx.input_dtype(i)), " but start has ", dtype_name(dt));
  for (size_t i = 0; i < 3; ++i)
    if (ctx.has_shape(i) && num_elements(ctx.input_shape(i)).is_const())
      TS_CHECK(num_elements(ctx.input_shape(i)) == Dim(1), ctx.node.describe(), ": input ", i,
               " must be a scalar, got shape ", shape_str(ctx.input_shape(i)));
  const Tensor* c[3] = {ctx.input_const(0), ctx.input_const(1), ctx.input_const(2)};
  if (c[0] && c[1] && c[2] && is_float(dt)) {
    ctx.set_output(0, dt, {range_count_float(c[0]->get_f64(0), c[1]->get_f64(0), c[2]->get_f64(0), ctx.node)});
    return;
  }
  if (is_int(dt)) {
    auto s = ctx.input_dims_value(0), l = ctx.input_dims_value(1), d = ctx.input_dims_value(2);
    if (s && l && d && s->size() == 1 && l->size() == 1 && d->size() == 1) {
      const Dim &start = (*s)[0], &limit = (*l)[0], &delta = (*d)[0];
      if (start.is_const() && limit.is_const() && delta.is_const()) {
        const int64_t n = range_count_int(start.value(), limit.value(), delta.value(), ctx.node);
        ctx.set_output(0, dt, {n});
        if (n <= static_cast<int64_t>(kMaxSymElements)) {
          SymValue v;
          for (int64_t i = 0; i < n; ++i) v.push_back(start.value() + i * delta.value());
          ctx.set_output_sym(0, std::move(v));
        }
        return;
      }
      if (delta.is_const() && delta.value() != 0) {
        ctx.set_output(0, dt, {Dim::max(Dim::ceildiv(limit - start, delta), 0)});
        return;
      }
    }
  }
  ctx.set_output(0, dt, fresh_shape(ctx, 0, 1));
}

void range_kernel(KernelContext& ctx) {
  const Tensor &s = ctx.input(0), &l = ctx.input(1), &d = ctx.input(2);
  const DType dt = s.dtype();
  check_dtype(ctx.node, 0, dt, range_dtype_ok, "float, double, int16, int32, int64, float16 or bfloat16");
  for (const Tensor* t : {&s, &l, &d}) {
    TS_CHECK(t->dtype() == dt, ctx.node.describe(), ": start, limit and delta must have the same dtype");
    TS_CHECK(t->numel() == 1, ctx.node.describe(), ": start, limit and delta must be scalars, got shape ",
             dims_str(t->shape()));
  }
  if (is_int(dt)) {
    const int64_t a = s.get_i64(0), step = d.get_i64(0);
    const int64_t n = range_count_int(a, l.get_i64(0), step, ctx.node);
    Tensor out(dt, {n});
    for (int64_t i = 0; i < n; ++i) out.set_i64(i, a + i * step);
    ctx.set_output(0, std::move(out));
    return;
  }
  const double a = s.get_f64(0), step = d.get_f64(0);
  const int64_t n = range_count_float(a, l.get_f64(0), step, ctx.node);
  // float16/bfloat16 compute in the stash type (float by default), then round.
  const bool low = dt == DType::F16 || dt == DType::BF16;
  const int64_t stash = ctx.node.attr_int("stash_type", 1);
  TS_CHECK(!low || stash == 1 || stash == 11, ctx.node.describe(), ": stash_type must be 1 (float) or 11 (double)");
  Tensor out(dt, {n});
  for (int64_t i = 0; i < n; ++i) {
    double v = a + static_cast<double>(i) * step;
    if (low && stash == 1) v = static_cast<float>(v);
    if (dt == DType::F32) v = static_cast<float>(v);
    out.set_f64(i, v);
  }
  ctx.set_output(0, std::move(out));
}

// ---- EyeLike ------------------------------------------------------------------------------------

DType eyelike_dtype(const Node& n, DType in) {
  if (!n.has_attr("dtype")) return in;
  DType t;
  TS_CHECK(dtype_from_onnx(static_cast<int>(n.attr_int("dtype", 0)), &t) && t != DType::String, n.describe(),
           ": unsupported dtype ", n.attr_int("dtype", 0));
  return t;
}

void eyelike_infer(InferContext& ctx) {
  const DType dt = eyelike_dtype(ctx.node, ctx.input_dtype(0));
  check_dtype(ctx.node, 0, ctx.input_dtype(0), [](DType t) { return t != DType::String; }, "a numeric or bool type");
  if (!ctx.has_shape(0)) {
    ctx.set_output(0, dt, fresh_shape(ctx, 0, 2));
    return;
  }
  const Shape& s = ctx.input_shape(0);
  TS_CHECK(s.size() == 2, ctx.node.describe(), ": input must be 2-D, got ", shape_str(s));
  ctx.set_output(0, dt, s);
}

void eyelike_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TS_CHECK(x.rank() == 2, ctx.node.describe(), ": input must be 2-D, got ", dims_str(x.shape()));
  TS_CHECK(x.dtype() != DType::String, ctx.node.describe(), ": string input is not supported");
  const DType dt = eyelike_dtype(ctx.node, x.dtype());
  const int64_t k = ctx.node.attr_int("k", 0);
  const int64_t rows = x.dim(0), cols = x.dim(1);
  Tensor out(dt, x.shape());
  for (int64_t i = 0; i < rows; ++i) {
    // Column i + k, computed without overflow for hostile k.
    if (k >= cols || k <= -rows) break;
    const int64_t j = i + k;
    if (j >= 0 && j < cols) out.set_i64(i * cols + j, 1);
  }
  ctx.set_output(0, std::move(out));
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  add_op(r, {.name = "Constant", .min_inputs = 0, .max_inputs = 0, .infer = constant_infer, .kernel = constant_kernel});
  add_op(r, {.name = "Identity", .min_inputs = 1, .max_inputs = 1, .infer = identity_infer, .kernel = identity_kernel});
  add_op(r, {.name = "Shape", .min_inputs = 1, .max_inputs = 1, .infer = shape_infer, .kernel = shape_kernel});
  add_op(r, {.name = "Size", .min_inputs = 1, .max_inputs = 1, .infer = size_infer, .kernel = size_kernel});
  add_op(r, {.name = "Reshape", .min_inputs = 2, .max_inputs = 2, .infer = reshape_infer, .kernel = reshape_kernel,
         .upgrade = reshape_upgrade});
  add_op(r, {.name = "Flatten", .min_inputs = 1, .max_inputs = 1, .infer = flatten_infer, .kernel = flatten_kernel});
  add_op(r, {.name = "Squeeze", .min_inputs = 1, .max_inputs = 2, .infer = squeeze_infer, .kernel = squeeze_kernel,
         .upgrade = axes_attr_upgrade});
  add_op(r, {.name = "Unsqueeze", .min_inputs = 2, .max_inputs = 2, .infer = unsqueeze_infer,
         .kernel = unsqueeze_kernel, .upgrade = axes_attr_upgrade});
  add_op(r, {.name = "Expand", .min_inputs = 2, .max_inputs = 2, .infer = expand_infer, .kernel = expand_kernel,
         .since_version = 8});
  add_op(r, {.name = "ConstantOfShape", .min_inputs = 1, .max_inputs = 1, .infer = constant_of_shape_infer,
         .kernel = constant_of_shape_kernel, .since_version = 9});
  add_op(r, {.name = "Range", .min_inputs = 3, .max_inputs = 3, .infer = range_infer, .kernel = range_kernel,
         .since_version = 11});
  add_op(r, {.name = "EyeLike", .min_inputs = 1, .max_inputs = 1, .infer = eyelike_infer, .kernel = eyelike_kernel,
         .since_version = 9});
}

}  // namespace tessel::movement
