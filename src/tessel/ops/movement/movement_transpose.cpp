// Layout operators that reorder elements: Transpose, DepthToSpace and
// SpaceToDepth (a 6-D transpose), ReverseSequence. Every output element is
// one input element; the kernels map output positions to input offsets.
#include "tessel/ops/movement/movement_common.h"
#include "tessel/ops/movement/movement_layout.h"
#include "tessel/support/error.h"

namespace tessel::movement {
namespace {

// ---- Transpose ---------------------------------------------------------------------

std::vector<int64_t> transpose_perm(const Node& n, size_t rank) {
  std::vector<int64_t> perm;
  if (n.has_attr("perm")) {
    perm = n.attr_ints("perm");
  } else {
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  TS_CHECK(perm.size() == rank, n.describe(), ": perm has ", perm.size(), " entries for an input of rank ", rank);
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    p = normalize_axis(p, static_cast<int64_t>(rank), n);
    TS_CHECK(!seen[static_cast<size_t>(p)], n.describe(), ": perm is not a permutation");
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

void transpose_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  if (!ctx.has_shape(0)) {
    if (ctx.node.has_attr("perm"))
      ctx.set_output(0, dt, fresh_shape(ctx, 0, ctx.node.attr_ints("perm").size()));
    else
      ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const auto perm = transpose_perm(ctx.node, s.size());
  Shape out;
  for (int64_t p : perm) out.push_back(s[static_cast<size_t>(p)]);
  ctx.set_output(0, dt, std::move(out));
  if (const SymValue* v = ctx.input_sym(0); v && s.size() <= 1) ctx.set_output_sym(0, *v);
}

void transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto perm = transpose_perm(ctx.node, x.rank());
  const auto strides = strides_of(x.shape());
  std::vector<int64_t> out_dims;
  AxisTables tab;
  for (int64_t p : perm) {
    const int64_t n = x.dim(static_cast<int>(p));
    out_dims.push_back(n);
    std::vector<int64_t> t(static_cast<size_t>(n));
    for (int64_t o = 0; o < n; ++o) t[static_cast<size_t>(o)] = o * strides[static_cast<size_t>(p)];
    tab.push_back(std::move(t));
  }
  Tensor out(x.dtype(), out_dims);
  copy_box(x, tab, out, {}, out_dims);
  ctx.set_output(0, std::move(out));
}

// ---- DepthToSpace, SpaceToDepth -----------------------------------------------------------

int64_t blocksize(const Node& n) {
  const int64_t b = n.attr("blocksize", Attribute::Kind::Int).i;
  TS_CHECK(b >= 1, n.describe(), ": blocksize must be >= 1, got ", b);
  return b;
}

bool crd_mode(const Node& n) {
  const std::string m = n.attr_string("mode", "DCR");
  TS_CHECK(m == "DCR" || m == "CRD", n.describe(), ": mode must be DCR or CRD, got '", m, "'");
  return m == "CRD";
}

void depth_to_space_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const int64_t b = blocksize(ctx.node);
  crd_mode(ctx.node);
  if (!ctx.has_shape(0)) {
    ctx.set_output(0, dt, fresh_shape(ctx, 0, 4));
    return;
  }
  const Shape& s = ctx.input_shape(0);
  TS_CHECK(s.size() == 4, ctx.node.describe(), ": input must be 4-D, got ", shape_str(s));
  TS_CHECK(!s[1].is_const() || s[1].value() % (b * b) == 0, ctx.node.describe(), ": channels ", s[1].str(),
           " are not divisible by blocksize^2 = ", b * b);
  ctx.set_output(0, dt, {s[0], Dim::floordiv(s[1], b * b), s[2] * b, s[3] * b});
}

void space_to_depth_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const int64_t b = blocksize(ctx.node);
  crd_mode(ctx.node);
  if (!ctx.has_shape(0)) {
    ctx.set_output(0, dt, fresh_shape(ctx, 0, 4));
    return;
  }
  const Shape& s = ctx.input_shape(0);
  TS_CHECK(s.size() == 4, ctx.node.describe(), ": input must be 4-D, got ", shape_str(s));
  for (size_t d = 2; d < 4; ++d)
    TS_CHECK(!s[d].is_const() || s[d].value() % b == 0, ctx.node.describe(), ": spatial size ", s[d].str(),
             " is not divisible by blocksize ", b);
  ctx.set_output(0, dt, {s[0], s[1] * (b * b), Dim::floordiv(s[2], b), Dim::floordiv(s[3], b)});
}

// Both ops are a 6-D transpose: out6[o] = in6[perm(o)], where the 6-D views of
// the input and the output are plain reshapes.
void permute6(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& in6, const std::vector<int64_t>& perm,
              const std::vector<int64_t>& out4) {
  const auto strides = strides_of(in6);
  std::vector<int64_t> out6;
  AxisTables tab;
  for (int64_t p : perm) {
    const int64_t n = in6[static_cast<size_t>(p)];
    out6.push_back(n);
    std::vector<int64_t> t(static_cast<size_t>(n));
    for (int64_t o = 0; o < n; ++o) t[static_cast<size_t>(o)] = o * strides[static_cast<size_t>(p)];
    tab.push_back(std::move(t));
  }
  Tensor out(x.dtype(), out6);
  copy_box(x, tab, out, {}, out6);
  ctx.set_output(0, out.reshaped(out4));
}

void depth_to_space_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t b = blocksize(ctx.node);
  TS_CHECK(x.rank() == 4, ctx.node.describe(), ": input must be 4-D, got ", dims_str(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  TS_CHECK(c % (b * b) == 0, ctx.node.describe(), ": channels ", c, " are not divisible by blocksize^2 = ", b * b);
  const int64_t oc = c / (b * b);
  const std::vector<int64_t> out4 = {n, oc, checked_mul(h, b), checked_mul(w, b)};
  if (crd_mode(ctx.node))
    permute6(ctx, x, {n, oc, b, b, h, w}, {0, 1, 4, 2, 5, 3}, out4);
  else
    permute6(ctx, x, {n, b, b, oc, h, w}, {0, 3, 4, 1, 5, 2}, out4);
}

void space_to_depth_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t b = blocksize(ctx.node);
  TS_CHECK(x.rank() == 4, ctx.node.describe(), ": input must be 4-D, got ", dims_str(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  TS_CHECK(h % b == 0 && w % b == 0, ctx.node.describe(), ": spatial dims ", h, "x", w,
           " are not divisible by blocksize ", b);
  const std::vector<int64_t> in6 = {n, c, h / b, b, w / b, b};
  const std::vector<int64_t> out4 = {n, checked_mul(c, b * b), h / b, w / b};
  if (crd_mode(ctx.node))
    permute6(ctx, x, in6, {0, 1, 3, 5, 2, 4}, out4);
  else
    permute6(ctx, x, in6, {0, 3, 5, 1, 2, 4}, out4);
}

// ---- ReverseSequence ----------------------------------------------------------------------

void reverse_sequence_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  const int64_t ba = ctx.node.attr_int("batch_axis", 1), ta = ctx.node.attr_int("time_axis", 0);
  TS_CHECK((ba == 0 || ba == 1) && (ta == 0 || ta == 1) && ba != ta, ctx.node.describe(),
           ": batch_axis and time_axis must be 0 and 1 in some order");
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  TS_CHECK(ctx.input_shape(0).size() >= 2, ctx.node.describe(), ": input must have rank >= 2");
  ctx.set_output(0, dt, ctx.input_shape(0));
}

void reverse_sequence_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t ba = ctx.node.attr_int("batch_axis", 1), ta = ctx.node.attr_int("time_axis", 0);
  TS_CHECK((ba == 0 || ba == 1) && (ta == 0 || ta == 1) && ba != ta, ctx.node.describe(),
           ": batch_axis and time_axis must be 0 and 1 in some order");
  TS_CHECK(x.rank() >= 2, ctx.node.describe(), ": input must have rank >= 2, got ", dims_str(x.shape()));
  const Tensor& lt = ctx.input(1);
  TS_CHECK(lt.dtype() == DType::I64 && lt.rank() == 1, ctx.node.describe(), ": sequence_lens must be 1-D int64");
  const auto lens = int_values(lt, ctx.node, "sequence_lens");
  const int64_t batch = x.dim(static_cast<int>(ba)), time = x.dim(static_cast<int>(ta));
  TS_CHECK(static_cast<int64_t>(lens.size()) == batch, ctx.node.describe(), ": sequence_lens has ", lens.size(),
           " entries for batch size ", batch);
  const auto strides = strides_of(x.shape());
  const int64_t inner = strides[1];  // elements after the first two axes
  Tensor out = x;  // positions past each length stay as they are
  out.mutable_raw();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lens[static_cast<size_t>(b)];
    TS_CHECK(len >= 0 && len <= time, ctx.node.describe(), ": sequence length ", len, " is out of range [0, ", time,
             "]");
    for (int64_t t = 0; t < len; ++t) {
      const int64_t src_t = len - 1 - t;
      const int64_t di = b * strides[static_cast<size_t>(ba)] + t * strides[static_cast<size_t>(ta)];
      const int64_t si = b * strides[static_cast<size_t>(ba)] + src_t * strides[static_cast<size_t>(ta)];
      copy_elems(x, si, out, di, inner);
    }
  }
  ctx.set_output(0, std::move(out));
}

}  // namespace

void register_transpose_ops(OpRegistry& r) {
  add_op(r, {.name = "Transpose", .min_inputs = 1, .max_inputs = 1, .infer = transpose_infer,
             .kernel = transpose_kernel});
  add_op(r, {.name = "DepthToSpace", .min_inputs = 1, .max_inputs = 1, .infer = depth_to_space_infer,
             .kernel = depth_to_space_kernel});
  add_op(r, {.name = "SpaceToDepth", .min_inputs = 1, .max_inputs = 1, .infer = space_to_depth_infer,
             .kernel = space_to_depth_kernel});
  add_op(r, {.name = "ReverseSequence", .min_inputs = 2, .max_inputs = 2, .infer = reverse_sequence_infer,
             .kernel = reverse_sequence_kernel, .since_version = 10});
}

}  // namespace tessel::movement
