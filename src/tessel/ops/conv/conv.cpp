// Convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv. DeformConv,
// CausalConvWithState and Col2Im live in their own files and register from
// here.
//
// Every forward convolution is im2col + a row product per (image, group):
// the column matrix holds the receptive fields, and each output row is
// accumulated in double (float types; exact products, one rounding at the
// end) or int64 (integer types) with the innermost loop running over
// contiguous output positions.
#include <cmath>

#include "tessel/ops/conv/conv_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_conv_extra_ops(OpRegistry& r);  // conv_extra.cpp
void register_image_ops(OpRegistry& r);        // image.cpp
void register_attention_ops(OpRegistry& r);    // attention.cpp
void register_detection_ops(OpRegistry& r);    // detection.cpp

namespace {

using convutil::AutoPad;
using convutil::Window;

// ---- shared shape logic ---------------------------------------------------------

// Spatial kernel dims from W's shape when static, else from kernel_shape.
std::optional<std::vector<int64_t>> kernel_dims_infer(const InferContext& ctx, size_t w_input, size_t nsp) {
  if (ctx.has_shape(w_input)) {
    const Shape& ws = ctx.input_shape(w_input);
    TS_CHECK(ws.size() == nsp + 2, ctx.node.describe(), ": weight has rank ", ws.size(), ", expected ", nsp + 2);
    std::vector<int64_t> k;
    for (size_t i = 2; i < ws.size(); ++i) {
      if (!ws[i].is_const()) break;
      k.push_back(ws[i].value());
    }
    if (k.size() == nsp) return k;
  }
  if (ctx.node.has_attr("kernel_shape")) return ctx.node.attr_ints("kernel_shape");
  return std::nullopt;
}

// Checks channel counts of a forward convolution: X [N, C, ...], W [M, C/group, ...].
void check_forward_channels(const Node& n, const Dim& c, const Dim& wc, const Dim& m, int64_t group) {
  TS_CHECK(group >= 1, n.describe(), ": group ", group, " must be >= 1");
  if (c.is_const() && wc.is_const())
    TS_CHECK(c.value() == checked_mul(wc.value(), group), n.describe(), ": input has ", c.value(),
             " channels but weight expects ", wc.value(), " x group ", group);
  if (m.is_const()) TS_CHECK(m.value() % group == 0, n.describe(), ": ", m.value(), " output channels are not divisible by group ", group);
}

// Output shape [N, M, out...] of a forward convolution, or nullopt when the
// input rank or the kernel is unknown.
std::optional<Shape> forward_conv_shape(InferContext& ctx, size_t x_in, size_t w_in) {
  if (!ctx.has_shape(x_in)) return std::nullopt;
  const Shape& xs = ctx.input_shape(x_in);
  TS_CHECK(xs.size() >= 3, ctx.node.describe(), ": input must have rank >= 3, got ", xs.size());
  const size_t nsp = xs.size() - 2;
  auto k = kernel_dims_infer(ctx, w_in, nsp);
  if (!k || !ctx.has_shape(w_in)) return std::nullopt;
  const Shape& ws = ctx.input_shape(w_in);
  const int64_t group = ctx.node.attr_int("group", 1);
  check_forward_channels(ctx.node, xs[1], ws[1], ws[0], group);
  Window w = convutil::read_window(ctx.node, nsp, &*k, true, false);
  Shape out{xs[0], ws[0]};
  for (const Dim& d : convutil::forward_out_dims(w, Shape(xs.begin() + 2, xs.end()))) out.push_back(d);
  return out;
}

// Concrete geometry of a forward convolution, validated against the data.
struct ConvGeom {
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0;
  std::vector<int64_t> in, out;
  Window w;
  int64_t in_size = 0, out_size = 0, ksize = 0;
};

ConvGeom forward_geom(const Node& node, const Tensor& x, const Tensor& wt) {
  TS_CHECK(x.rank() >= 3, node.describe(), ": input must have rank >= 3, got ", x.rank());
  TS_CHECK(wt.rank() == x.rank(), node.describe(), ": weight rank ", wt.rank(), " differs from input rank ", x.rank());
  ConvGeom g;
  g.n = x.dim(0);
  g.c = x.dim(1);
  g.m = wt.dim(0);
  g.group = node.attr_int("group", 1);
  check_forward_channels(node, g.c, wt.dim(1), g.m, g.group);
  g.cg = wt.dim(1);
  g.mg = g.m / g.group;
  g.in = convutil::dims_from(x, 2);
  const std::vector<int64_t> k = convutil::dims_from(wt, 2);
  g.w = convutil::read_window(node, g.in.size(), &k, true, false);
  g.out = convutil::forward_out_sizes(g.w, g.in, node);
  g.in_size = convutil::prod(g.in);
  g.out_size = convutil::prod(g.out);
  g.ksize = convutil::prod(k);
  convutil::check_elements(node, checked_mul(checked_mul(g.cg, g.ksize), g.out_size));  // column buffer
  convutil::check_elements(node, checked_mul(checked_mul(g.n, g.m), g.out_size));       // output
  return g;
}

// A pointwise convolution reads its input directly as the column matrix.
bool is_pointwise(const ConvGeom& g) {
  for (size_t i = 0; i < g.in.size(); ++i)
    if (g.w.kernel[i] != 1 || g.w.strides[i] != 1 || g.w.pads[i] != 0 || g.w.pads[g.in.size() + i] != 0) return false;
  return true;
}

// y[n, m, :] (zero-initialised, size n*m*out_size) += conv(x, w) in Acc.
template <class T, class Acc>
void conv_forward(const ConvGeom& g, const T* x, const T* w, T pad_value, Acc* y) {
  const bool pointwise = is_pointwise(g);
  const int64_t inner = g.cg * g.ksize;
  std::vector<T> col(pointwise ? 0 : static_cast<size_t>(inner * g.out_size));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const T* xg = x + (n * g.c + gi * g.cg) * g.in_size;
      const T* b = xg;
      if (!pointwise) {
        convutil::im2col(xg, g.cg, g.in, g.w, g.out, pad_value, col.data());
        b = col.data();
      }
      convutil::row_product(w + gi * g.mg * inner, b, g.mg, inner, g.out_size, y + (n * g.m + gi * g.mg) * g.out_size);
    }
}

void check_bias(const Node& node, const Tensor& b, int64_t m, DType dt) {
  TS_CHECK(b.dtype() == dt, node.describe(), ": bias dtype ", dtype_name(b.dtype()), " differs from ", dtype_name(dt));
  TS_CHECK(b.rank() == 1 && b.dim(0) == m, node.describe(), ": bias must have shape [", m, "], got ",
           dims_str(b.shape()));
}

// ---- Conv -------------------------------------------------------------------------

void conv_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, convutil::is_conv_float, "a float type (f16, bf16, f32, f64)");
  TS_CHECK(ctx.input_dtype(1) == dt, ctx.node.describe(), ": weight dtype differs from input dtype");
  if (ctx.has_input(2)) TS_CHECK(ctx.input_dtype(2) == dt, ctx.node.describe(), ": bias dtype differs from input dtype");
  auto s = forward_conv_shape(ctx, 0, 1);
  if (s)
    ctx.set_output(0, dt, *s);
  else
    ctx.set_output_unknown_shape(0, dt);
}

template <class T>
std::vector<double> conv_float_run(const ConvGeom& g, const std::vector<T>& x, const std::vector<T>& w) {
  std::vector<double> y(static_cast<size_t>(checked_mul(checked_mul(g.n, g.m), g.out_size)), 0.0);
  conv_forward<T, double>(g, x.data(), w.data(), T(0), y.data());
  return y;
}

void conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& wt = ctx.input(1);
  check_dtype(ctx.node, 0, x.dtype(), convutil::is_conv_float, "a float type (f16, bf16, f32, f64)");
  TS_CHECK(wt.dtype() == x.dtype(), ctx.node.describe(), ": weight dtype differs from input dtype");
  const ConvGeom g = forward_geom(ctx.node, x, wt);
  std::vector<double> y = x.dtype() == DType::F64
                              ? conv_float_run<double>(g, convutil::to_f64(x), convutil::to_f64(wt))
                              : conv_float_run<float>(g, convutil::to_f32(x), convutil::to_f32(wt));
  if (ctx.has_input(2)) {
    const Tensor& b = ctx.input(2);
    check_bias(ctx.node, b, g.m, x.dtype());
    const std::vector<double> bv = convutil::to_f64(b);
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t m = 0; m < g.m; ++m) {
        double* row = y.data() + (n * g.m + m) * g.out_size;
        for (int64_t j = 0; j < g.out_size; ++j) row[j] += bv[static_cast<size_t>(m)];
      }
  }
  std::vector<int64_t> shape{g.n, g.m};
  shape.insert(shape.end(), g.out.begin(), g.out.end());
  ctx.set_output(0, convutil::from_f64(x.dtype(), shape, y));
}

// ---- ConvTranspose ----------------------------------------------------------------

// Floor division (Python's //), for pads computed from possibly negative totals.
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

struct TransposeGeom {
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0;
  std::vector<int64_t> in, out, output_padding;
  Window w;
};

// Window and output sizes of ConvTranspose. `in` may hold -1 for unknown
// sizes when called from shape inference (then `out` is meaningless there).
void transpose_window(const Node& node, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel, Window* w,
                      std::vector<int64_t>* out, std::vector<int64_t>* output_padding) {
  const size_t nsp = in.size();
  *w = convutil::read_window(node, nsp, &kernel, true, false);
  *output_padding = node.attr_ints("output_padding", std::vector<int64_t>(nsp, 0));
  TS_CHECK(output_padding->size() == nsp, node.describe(), ": output_padding has ", output_padding->size(),
           " values, expected ", nsp);
  for (int64_t p : *output_padding)
    TS_CHECK(p >= 0 && p <= (int64_t{1} << 31), node.describe(), ": output_padding ", p, " is out of range");
  std::vector<int64_t> os = node.attr_ints("output_shape", {});
  if (os.size() == nsp + 2) os.erase(os.begin(), os.begin() + 2);  // some exporters include N and C
  TS_CHECK(os.empty() || os.size() == nsp, node.describe(), ": output_shape has ", os.size(), " values, expected ", nsp);
  out->assign(nsp, 0);
  for (size_t i = 0; i < nsp; ++i) {
    const int64_t full = checked_add(checked_add(checked_mul(w->strides[i], in[i] - 1), (*output_padding)[i]), w->extent(i));
    const bool same = w->auto_pad == AutoPad::SameUpper || w->auto_pad == AutoPad::SameLower;
    if (!os.empty() || same) {
      (*out)[i] = !os.empty() ? os[i] : checked_mul(in[i], w->strides[i]);
      TS_CHECK((*out)[i] >= 0, node.describe(), ": output_shape ", (*out)[i], " is negative");
      const int64_t total = full - (*out)[i];
      const int64_t half = floor_div(total, 2);
      // A larger output than the full result extends at the end (ONNX
      // Runtime and the spec's reference agree); a smaller one crops both
      // sides as the spec's formula says.
      w->pads[i] = total < 0 ? 0 : w->auto_pad == AutoPad::SameUpper ? half : total - half;
      w->pads[nsp + i] = total - w->pads[i];
    } else {
      if (w->auto_pad == AutoPad::Valid) w->pads[i] = w->pads[nsp + i] = 0;
      (*out)[i] = full - w->pads[i] - w->pads[nsp + i];
    }
  }
}

void conv_transpose_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, convutil::is_conv_float, "a float type (f16, bf16, f32, f64)");
  TS_CHECK(ctx.input_dtype(1) == dt, ctx.node.describe(), ": weight dtype differs from input dtype");
  if (ctx.has_input(2)) TS_CHECK(ctx.input_dtype(2) == dt, ctx.node.describe(), ": bias dtype differs from input dtype");
  if (!ctx.has_shape(0) || !ctx.has_shape(1)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& xs = ctx.input_shape(0);
  const Shape& ws = ctx.input_shape(1);
  TS_CHECK(xs.size() >= 3, ctx.node.describe(), ": input must have rank >= 3, got ", xs.size());
  const size_t nsp = xs.size() - 2;
  auto k = kernel_dims_infer(ctx, 1, nsp);
  if (!k) return ctx.set_output_unknown_shape(0, dt);
  const int64_t group = ctx.node.attr_int("group", 1);
  TS_CHECK(group >= 1, ctx.node.describe(), ": group ", group, " must be >= 1");
  if (xs[1].is_const() && ws[0].is_const())
    TS_CHECK(xs[1].value() == ws[0].value(), ctx.node.describe(), ": input has ", xs[1].value(),
             " channels but weight has ", ws[0].value());
  Shape out{xs[0], ws[1] * group};
  // Output sizes are affine in the input sizes; compute them with the static
  // rule when the input is static, symbolically otherwise.
  std::vector<int64_t> in(nsp, 1);
  bool all_static = true;
  for (size_t i = 0; i < nsp; ++i) {
    if (xs[i + 2].is_const()) in[i] = xs[i + 2].value();
    else all_static = false;
  }
  Window w;
  std::vector<int64_t> o, op;
  transpose_window(ctx.node, in, *k, &w, &o, &op);
  const bool fixed = ctx.node.has_attr("output_shape");
  const bool same = w.auto_pad == AutoPad::SameUpper || w.auto_pad == AutoPad::SameLower;
  for (size_t i = 0; i < nsp; ++i) {
    if (all_static || fixed) {
      out.push_back(o[i]);
    } else if (same) {
      out.push_back(xs[i + 2] * w.strides[i]);
    } else {
      out.push_back(xs[i + 2] * w.strides[i] + (op[i] + w.extent(i) - w.strides[i] - w.pads[i] - w.pads[nsp + i]));
    }
  }
  ctx.set_output(0, dt, out);
}

template <class T>
std::vector<double> conv_transpose_run(const TransposeGeom& g, const std::vector<T>& x, const std::vector<T>& w) {
  const int64_t in_size = convutil::prod(g.in), out_size = convutil::prod(g.out), ksize = convutil::prod(g.w.kernel);
  const int64_t rows = checked_mul(g.mg, ksize);
  std::vector<double> y(static_cast<size_t>(checked_mul(checked_mul(g.n, g.m), out_size)), 0.0);
  std::vector<double> col(static_cast<size_t>(checked_mul(rows, in_size)));
  // Transposed weights of one group: wt[r, c] = W[c, r], so that the column
  // matrix is a row product wt x X with contiguous inner loops.
  std::vector<T> wt(static_cast<size_t>(checked_mul(rows, g.cg)));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const T* wg = w.data() + gi * g.cg * rows;
      for (int64_t c = 0; c < g.cg; ++c)
        for (int64_t r = 0; r < rows; ++r) wt[static_cast<size_t>(r * g.cg + c)] = wg[c * rows + r];
      std::fill(col.begin(), col.end(), 0.0);
      convutil::row_product(wt.data(), x.data() + (n * g.c + gi * g.cg) * in_size, rows, g.cg, in_size, col.data());
      // The input positions play the role of conv "output" positions.
      convutil::col2im_add(col.data(), g.mg, g.out, g.w, g.in, y.data() + (n * g.m + gi * g.mg) * out_size);
    }
  return y;
}

void conv_transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& wt = ctx.input(1);
  const Node& node = ctx.node;
  check_dtype(node, 0, x.dtype(), convutil::is_conv_float, "a float type (f16, bf16, f32, f64)");
  TS_CHECK(wt.dtype() == x.dtype(), node.describe(), ": weight dtype differs from input dtype");
  TS_CHECK(x.rank() >= 3, node.describe(), ": input must have rank >= 3, got ", x.rank());
  TS_CHECK(wt.rank() == x.rank(), node.describe(), ": weight rank ", wt.rank(), " differs from input rank ", x.rank());
  TransposeGeom g;
  g.n = x.dim(0);
  g.c = x.dim(1);
  g.group = node.attr_int("group", 1);
  TS_CHECK(g.group >= 1, node.describe(), ": group ", g.group, " must be >= 1");
  TS_CHECK(wt.dim(0) == g.c, node.describe(), ": input has ", g.c, " channels but weight has ", wt.dim(0));
  TS_CHECK(g.c % g.group == 0, node.describe(), ": ", g.c, " input channels are not divisible by group ", g.group);
  g.cg = g.c / g.group;
  g.mg = wt.dim(1);
  g.m = checked_mul(g.mg, g.group);
  g.in = convutil::dims_from(x, 2);
  transpose_window(node, g.in, convutil::dims_from(wt, 2), &g.w, &g.out, &g.output_padding);
  for (int64_t o : g.out) TS_CHECK(o >= 0, node.describe(), ": output size ", o, " is negative");
  convutil::check_elements(node, checked_mul(checked_mul(g.n, g.m), convutil::prod(g.out)));
  convutil::check_elements(node, checked_mul(checked_mul(g.mg, convutil::prod(g.w.kernel)), convutil::prod(g.in)));
  std::vector<double> y = x.dtype() == DType::F64
                              ? conv_transpose_run<double>(g, convutil::to_f64(x), convutil::to_f64(wt))
                              : conv_transpose_run<float>(g, convutil::to_f32(x), convutil::to_f32(wt));
  const int64_t out_size = convutil::prod(g.out);
  if (ctx.has_input(2)) {
    const Tensor& b = ctx.input(2);
    check_bias(node, b, g.m, x.dtype());
    const std::vector<double> bv = convutil::to_f64(b);
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t m = 0; m < g.m; ++m) {
        double* row = y.data() + (n * g.m + m) * out_size;
        for (int64_t j = 0; j < out_size; ++j) row[j] += bv[static_cast<size_t>(m)];
      }
  }
  std::vector<int64_t> shape{g.n, g.m};
  shape.insert(shape.end(), g.out.begin(), g.out.end());
  ctx.set_output(0, convutil::from_f64(x.dtype(), shape, y));
}

// ---- ConvInteger / QLinearConv ----------------------------------------------------

bool is_q8(DType dt) { return dt == DType::I8 || dt == DType::U8; }

// A zero point or scale: scalar, or (when per_channel_len > 0) 1-D of that length.
std::vector<int64_t> read_int_param(const Node& node, const Tensor* t, const char* what, int64_t per_channel_len) {
  if (!t) return {0};
  const bool scalar = t->numel() == 1 && t->rank() <= 1;
  const bool per_channel = per_channel_len > 0 && t->rank() == 1 && t->dim(0) == per_channel_len;
  TS_CHECK(scalar || per_channel, node.describe(), ": ", what, " must be a scalar",
           per_channel_len > 0 ? str_cat(" or have shape [", per_channel_len, "]") : std::string(), ", got ",
           dims_str(t->shape()));
  std::vector<int64_t> v(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) v[static_cast<size_t>(i)] = t->get_i64(i);
  return v;
}

// Integer convolution of (x - x_zp) and (w - w_zp) accumulated in int64.
std::vector<int64_t> conv_integer_acc(const Node& node, const ConvGeom& g, const Tensor& x, const Tensor& w,
                                      const Tensor* xzp_t, const Tensor* wzp_t) {
  if (xzp_t) TS_CHECK(xzp_t->dtype() == x.dtype(), node.describe(), ": x_zero_point dtype differs from x");
  if (wzp_t) TS_CHECK(wzp_t->dtype() == w.dtype(), node.describe(), ": w_zero_point dtype differs from w");
  const int64_t xzp = read_int_param(node, xzp_t, "x_zero_point", 0)[0];
  const std::vector<int64_t> wzp = read_int_param(node, wzp_t, "w_zero_point", g.m);
  std::vector<int32_t> xv(static_cast<size_t>(x.numel())), wv(static_cast<size_t>(w.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) xv[static_cast<size_t>(i)] = static_cast<int32_t>(x.get_i64(i) - xzp);
  const int64_t per_m = g.m ? w.numel() / g.m : 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t zp = wzp.size() == 1 ? wzp[0] : wzp[static_cast<size_t>(i / per_m)];
    wv[static_cast<size_t>(i)] = static_cast<int32_t>(w.get_i64(i) - zp);
  }
  std::vector<int64_t> acc(static_cast<size_t>(checked_mul(checked_mul(g.n, g.m), g.out_size)), 0);
  // Padding holds the zero point, i.e. 0 after the shift.
  conv_forward<int32_t, int64_t>(g, xv.data(), wv.data(), 0, acc.data());
  return acc;
}

void conv_integer_infer(InferContext& ctx) {
  check_dtype(ctx.node, 0, ctx.input_dtype(0), is_q8, "int8 or uint8");
  check_dtype(ctx.node, 1, ctx.input_dtype(1), is_q8, "int8 or uint8");
  auto s = forward_conv_shape(ctx, 0, 1);
  if (s)
    ctx.set_output(0, DType::I32, *s);
  else
    ctx.set_output_unknown_shape(0, DType::I32);
}

void conv_integer_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  check_dtype(ctx.node, 0, x.dtype(), is_q8, "int8 or uint8");
  check_dtype(ctx.node, 1, w.dtype(), is_q8, "int8 or uint8");
  const ConvGeom g = forward_geom(ctx.node, x, w);
  const std::vector<int64_t> acc = conv_integer_acc(ctx.node, g, x, w, ctx.has_input(2) ? &ctx.input(2) : nullptr,
                                                    ctx.has_input(3) ? &ctx.input(3) : nullptr);
  std::vector<int64_t> shape{g.n, g.m};
  shape.insert(shape.end(), g.out.begin(), g.out.end());
  Tensor y(DType::I32, shape);
  int32_t* p = y.mutable_data<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) p[i] = static_cast<int32_t>(static_cast<uint32_t>(acc[i]));  // wraps
  ctx.set_output(0, std::move(y));
}

void qlinear_conv_infer(InferContext& ctx) {
  check_dtype(ctx.node, 0, ctx.input_dtype(0), is_q8, "int8 or uint8");
  check_dtype(ctx.node, 3, ctx.input_dtype(3), is_q8, "int8 or uint8");
  const DType yt = ctx.input_dtype(7);
  check_dtype(ctx.node, 7, yt, is_q8, "int8 or uint8");
  for (size_t i : {1, 4, 6})
    check_dtype(ctx.node, i, ctx.input_dtype(i), [](DType d) { return d == DType::F32; }, "float");
  if (ctx.has_input(8))
    check_dtype(ctx.node, 8, ctx.input_dtype(8), [](DType d) { return d == DType::I32; }, "int32");
  auto s = forward_conv_shape(ctx, 0, 3);
  if (s)
    ctx.set_output(0, yt, *s);
  else
    ctx.set_output_unknown_shape(0, yt);
}

void qlinear_conv_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  const Tensor& yzp_t = ctx.input(7);
  check_dtype(node, 0, x.dtype(), is_q8, "int8 or uint8");
  check_dtype(node, 3, w.dtype(), is_q8, "int8 or uint8");
  check_dtype(node, 7, yzp_t.dtype(), is_q8, "int8 or uint8");
  for (size_t i : {1, 4, 6})
    check_dtype(node, i, ctx.input(i).dtype(), [](DType d) { return d == DType::F32; }, "float");
  const ConvGeom g = forward_geom(node, x, w);
  std::vector<int64_t> acc = conv_integer_acc(node, g, x, w, &ctx.input(2), &ctx.input(5));
  const Tensor& xs_t = ctx.input(1);
  const Tensor& ws_t = ctx.input(4);
  const Tensor& ys_t = ctx.input(6);
  TS_CHECK(xs_t.numel() == 1 && ys_t.numel() == 1, node.describe(), ": x_scale and y_scale must be scalars");
  TS_CHECK(ws_t.numel() == 1 || (ws_t.rank() == 1 && ws_t.dim(0) == g.m), node.describe(),
           ": w_scale must be a scalar or have shape [", g.m, "]");
  const int64_t yzp = read_int_param(node, &yzp_t, "y_zero_point", 0)[0];
  if (ctx.has_input(8)) {
    const Tensor& b = ctx.input(8);
    TS_CHECK(b.dtype() == DType::I32 && b.rank() == 1 && b.dim(0) == g.m, node.describe(),
             ": bias must be int32 of shape [", g.m, "]");
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t m = 0; m < g.m; ++m)
        for (int64_t j = 0; j < g.out_size; ++j) acc[static_cast<size_t>((n * g.m + m) * g.out_size + j)] += b.get_i64(m);
  }
  const float xs = xs_t.data<float>()[0], ys = ys_t.data<float>()[0];
  const int64_t lo = yzp_t.dtype() == DType::I8 ? -128 : 0, hi = yzp_t.dtype() == DType::I8 ? 127 : 255;
  std::vector<int64_t> shape{g.n, g.m};
  shape.insert(shape.end(), g.out.begin(), g.out.end());
  Tensor y(yzp_t.dtype(), shape);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t m = 0; m < g.m; ++m) {
      // The combined scale is formed in float, as the spec's reference does.
      const float scale = xs * ws_t.data<float>()[ws_t.numel() == 1 ? 0 : m] / ys;
      for (int64_t j = 0; j < g.out_size; ++j) {
        const int64_t i = (n * g.m + m) * g.out_size + j;
        double v = static_cast<double>(acc[static_cast<size_t>(i)]) * scale + static_cast<double>(yzp);
        v = std::nearbyint(std::min<double>(std::max<double>(v, lo), hi));  // round half to even
        y.set_i64(i, static_cast<int64_t>(v));
      }
    }
  ctx.set_output(0, std::move(y));
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  r.add({"Conv", "", 2, 3, 1, 1, conv_infer, conv_kernel, nullptr, 1});
  r.add({"ConvTranspose", "", 2, 3, 1, 1, conv_transpose_infer, conv_transpose_kernel, nullptr, 1});
  r.add({"ConvInteger", "", 2, 4, 1, 1, conv_integer_infer, conv_integer_kernel, nullptr, 10});
  r.add({"QLinearConv", "", 8, 9, 1, 1, qlinear_conv_infer, qlinear_conv_kernel, nullptr, 10});
  register_conv_extra_ops(r);
  register_image_ops(r);
  register_attention_ops(r);
  register_detection_ops(r);
}

}  // namespace tessel
