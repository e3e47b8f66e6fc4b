// The less common convolution-family ops: Col2Im, DeformConv and
// CausalConvWithState. They reuse the im2col/col2im/row-product pieces of
// conv_util.h.
#include <cmath>
#include <type_traits>

#include "tessel/ops/conv/conv_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

using convutil::Window;

const char* kFloatTypes = "a float type (f16, bf16, f32, f64)";

// ---- Col2Im ---------------------------------------------------------------------------

// Reads a 1-D int64 input of `len` values (len < 0: any length).
std::vector<int64_t> int_list(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  TS_CHECK(t.dtype() == DType::I64 && t.rank() == 1, ctx.node.describe(), ": ", what, " must be a 1-D int64 tensor");
  std::vector<int64_t> v;
  for (int64_t k = 0; k < t.numel(); ++k) v.push_back(t.get_i64(k));
  return v;
}

// Col2Im has no auto_pad/ceil_mode and takes the kernel from `block_shape`.
Window col2im_window(const Node& node, const std::vector<int64_t>& block) {
  Window w = convutil::read_window(node, block.size(), &block, true, false);
  TS_CHECK(w.auto_pad == convutil::AutoPad::NotSet, node.describe(), ": auto_pad is not an attribute of Col2Im");
  return w;
}

void col2im_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, [](DType d) { return d != DType::String && d != DType::Undefined; }, "a numeric type");
  check_dtype(ctx.node, 1, ctx.input_dtype(1), [](DType d) { return d == DType::I64; }, "int64");
  check_dtype(ctx.node, 2, ctx.input_dtype(2), [](DType d) { return d == DType::I64; }, "int64");
  auto image = ctx.input_dims_value(1);
  auto block = ctx.input_dims_value(2);
  if (!ctx.has_shape(0) || !image || !block) return ctx.set_output_unknown_shape(0, dt);
  const Shape& xs = ctx.input_shape(0);
  TS_CHECK(xs.size() == 3, ctx.node.describe(), ": input must have rank 3, got ", xs.size());
  Dim kprod = 1;
  for (const Dim& d : *block) kprod = kprod * d;
  Dim c = Dim::floordiv(xs[1], kprod);
  if (xs[1].is_const() && kprod.is_const()) {
    TS_CHECK(kprod.value() > 0 && xs[1].value() % kprod.value() == 0, ctx.node.describe(), ": input dim 1 (",
             xs[1].value(), ") is not divisible by the block size ", kprod.value());
  }
  Shape out{xs[0], c};
  out.insert(out.end(), image->begin(), image->end());
  ctx.set_output(0, dt, out);
}

template <class Acc>
std::vector<Acc> col2im_run(const Tensor& x, int64_t n, int64_t c, const std::vector<int64_t>& image, const Window& w,
                            const std::vector<int64_t>& blocks) {
  const int64_t img = convutil::prod(image), cols = convutil::prod(blocks), k = convutil::prod(w.kernel);
  std::vector<Acc> xv(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i)
    xv[static_cast<size_t>(i)] = std::is_floating_point_v<Acc> ? static_cast<Acc>(x.get_f64(i)) : static_cast<Acc>(x.get_i64(i));
  std::vector<Acc> y(static_cast<size_t>(checked_mul(checked_mul(n, c), img)), Acc(0));
  for (int64_t b = 0; b < n; ++b)
    convutil::col2im_add(xv.data() + b * c * k * cols, c, image, w, blocks, y.data() + b * c * img);
  return y;
}

void col2im_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  TS_CHECK(x.dtype() != DType::String, node.describe(), ": strings cannot be summed");
  TS_CHECK(x.rank() == 3, node.describe(), ": input must have rank 3, got ", x.rank());
  const std::vector<int64_t> image = int_list(ctx, 1, "image_shape");
  const std::vector<int64_t> block = int_list(ctx, 2, "block_shape");
  TS_CHECK(image.size() == block.size() && !image.empty(), node.describe(),
           ": image_shape and block_shape must have the same non-zero length");
  for (int64_t d : image) TS_CHECK(d >= 0, node.describe(), ": image_shape values must be >= 0");
  Window w = col2im_window(node, block);
  const std::vector<int64_t> blocks = convutil::forward_out_sizes(w, image, node);
  const int64_t k = convutil::prod(block);
  TS_CHECK(x.dim(1) % k == 0, node.describe(), ": input dim 1 (", x.dim(1), ") is not divisible by the block size ", k);
  TS_CHECK(x.dim(2) == convutil::prod(blocks), node.describe(), ": input dim 2 (", x.dim(2),
           ") differs from the number of sliding blocks ", convutil::prod(blocks));
  const int64_t n = x.dim(0), c = x.dim(1) / k;
  convutil::check_elements(node, checked_mul(checked_mul(n, c), convutil::prod(image)));
  std::vector<int64_t> shape{n, c};
  shape.insert(shape.end(), image.begin(), image.end());
  if (is_float(x.dtype())) {
    ctx.set_output(0, convutil::from_f64(x.dtype(), shape, col2im_run<double>(x, n, c, image, w, blocks)));
    return;
  }
  const std::vector<int64_t> y = col2im_run<int64_t>(x, n, c, image, w, blocks);
  Tensor t(x.dtype(), shape);
  for (size_t i = 0; i < y.size(); ++i) t.set_i64(static_cast<int64_t>(i), y[i]);
  ctx.set_output(0, std::move(t));
}

// ---- DeformConv -----------------------------------------------------------------------

void deform_conv_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, convutil::is_conv_float, kFloatTypes);
  for (size_t i = 1; i < 5; ++i)
    if (ctx.has_input(i)) TS_CHECK(ctx.input_dtype(i) == dt, ctx.node.describe(), ": input ", i, " dtype differs from X");
  if (!ctx.has_shape(0) || !ctx.has_shape(1)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& xs = ctx.input_shape(0);
  const Shape& ws = ctx.input_shape(1);
  TS_CHECK(xs.size() >= 3 && ws.size() == xs.size(), ctx.node.describe(), ": X and W must have the same rank >= 3");
  std::vector<int64_t> k;
  for (size_t i = 2; i < ws.size(); ++i) {
    if (!ws[i].is_const()) return ctx.set_output_unknown_shape(0, dt);
    k.push_back(ws[i].value());
  }
  Window w = convutil::read_window(ctx.node, xs.size() - 2, &k, true, false);
  Shape out{xs[0], ws[0]};
  for (const Dim& d : convutil::forward_out_dims(w, Shape(xs.begin() + 2, xs.end()))) out.push_back(d);
  ctx.set_output(0, dt, out);
}

// Multilinear sample of `plane` at fractional position `p` (zeros outside).
double sample_zero_pad(const double* plane, const std::vector<int64_t>& dims, const std::vector<double>& p) {
  const size_t nd = dims.size();
  std::vector<int64_t> base(nd);
  std::vector<double> frac(nd);
  for (size_t d = 0; d < nd; ++d) {
    // Far-away points read nothing; this also keeps the casts in range.
    if (!(p[d] > -1.0 && p[d] < static_cast<double>(dims[d]))) return 0.0;
    const double f = std::floor(p[d]);
    base[d] = static_cast<int64_t>(f);
    frac[d] = p[d] - f;
  }
  double acc = 0;
  for (int64_t corner = 0; corner < (int64_t{1} << nd); ++corner) {
    double wgt = 1;
    int64_t off = 0;
    bool inside = true;
    for (size_t d = 0; d < nd; ++d) {
      const int64_t bit = (corner >> (nd - 1 - d)) & 1;
      const int64_t i = base[d] + bit;
      if (i < 0 || i >= dims[d]) inside = false;
      wgt *= bit ? frac[d] : 1 - frac[d];
      off = off * dims[d] + i;
    }
    if (inside && wgt != 0) acc += wgt * plane[off];
  }
  return acc;
}

void deform_conv_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& wt = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  check_dtype(node, 0, x.dtype(), convutil::is_conv_float, kFloatTypes);
  TS_CHECK(wt.dtype() == x.dtype() && offset.dtype() == x.dtype(), node.describe(), ": W and offset must have X's dtype");
  TS_CHECK(x.rank() >= 3 && wt.rank() == x.rank(), node.describe(), ": X and W must have the same rank >= 3");
  const size_t nd = x.rank() - 2;
  const int64_t n = x.dim(0), c = x.dim(1), m = wt.dim(0);
  const int64_t group = node.attr_int("group", 1), og = node.attr_int("offset_group", 1);
  TS_CHECK(group >= 1 && og >= 1, node.describe(), ": group and offset_group must be >= 1");
  TS_CHECK(c == checked_mul(wt.dim(1), group) && m % group == 0, node.describe(), ": channel counts X ", c, ", W ",
           dims_str(wt.shape()), " do not fit group ", group);
  TS_CHECK(c % og == 0, node.describe(), ": ", c, " input channels are not divisible by offset_group ", og);
  const std::vector<int64_t> in = convutil::dims_from(x, 2), kdims = convutil::dims_from(wt, 2);
  Window w = convutil::read_window(node, nd, &kdims, true, false);
  const std::vector<int64_t> out = convutil::forward_out_sizes(w, in, node);
  const int64_t ksize = convutil::prod(kdims), out_size = convutil::prod(out), in_size = convutil::prod(in);
  convutil::check_elements(node, checked_mul(checked_mul(n, m), out_size));
  convutil::check_elements(node, checked_mul(checked_mul(c, ksize), out_size));
  std::vector<int64_t> oshape{n, og * ksize * static_cast<int64_t>(nd)};
  oshape.insert(oshape.end(), out.begin(), out.end());
  TS_CHECK(offset.shape() == oshape, node.describe(), ": offset must have shape ", dims_str(oshape), ", got ",
           dims_str(offset.shape()));
  std::vector<double> mask;
  if (ctx.has_input(4)) {
    const Tensor& mt = ctx.input(4);
    std::vector<int64_t> mshape{n, og * ksize};
    mshape.insert(mshape.end(), out.begin(), out.end());
    TS_CHECK(mt.dtype() == x.dtype() && mt.shape() == mshape, node.describe(), ": mask must have shape ",
             dims_str(mshape));
    mask = convutil::to_f64(mt);
  }
  const int64_t cg = c / group, mg = m / group, c_per_og = c / og;
  const std::vector<double> xv = convutil::to_f64(x), wv = convutil::to_f64(wt), ov = convutil::to_f64(offset);
  std::vector<double> y(static_cast<size_t>(checked_mul(checked_mul(n, m), out_size)), 0.0);
  std::vector<double> col(static_cast<size_t>(checked_mul(checked_mul(cg, ksize), out_size)));
  std::vector<int64_t> k(nd), o(nd);
  std::vector<double> p(nd);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t gi = 0; gi < group; ++gi) {
      // Deformed im2col: each receptive-field point is sampled at its
      // regular position plus the learned offset, scaled by the mask.
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t cin = gi * cg + ci, ogi = cin / c_per_og;
        const double* plane = xv.data() + (b * c + cin) * in_size;
        for (int64_t kf = 0; kf < ksize; ++kf) {
          for (int64_t t = kf, d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
            k[static_cast<size_t>(d)] = t % kdims[static_cast<size_t>(d)];
            t /= kdims[static_cast<size_t>(d)];
          }
          double* row = col.data() + (ci * ksize + kf) * out_size;
          std::fill(o.begin(), o.end(), 0);
          for (int64_t j = 0; j < out_size; ++j) {
            for (size_t d = 0; d < nd; ++d) {
              const int64_t ch = (ogi * ksize + kf) * static_cast<int64_t>(nd) + static_cast<int64_t>(d);
              p[d] = static_cast<double>(o[d] * w.strides[d] - w.pads[d] + k[d] * w.dilations[d]) +
                     ov[static_cast<size_t>((b * og * ksize * static_cast<int64_t>(nd) + ch) * out_size + j)];
            }
            double v = sample_zero_pad(plane, in, p);
            if (!mask.empty()) v *= mask[static_cast<size_t>((b * og * ksize + ogi * ksize + kf) * out_size + j)];
            row[j] = v;
            for (int64_t d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
              if (++o[static_cast<size_t>(d)] < out[static_cast<size_t>(d)]) break;
              o[static_cast<size_t>(d)] = 0;
            }
          }
        }
      }
      convutil::row_product(wv.data() + gi * mg * cg * ksize, col.data(), mg, cg * ksize, out_size,
                            y.data() + (b * m + gi * mg) * out_size);
    }
  if (ctx.has_input(3)) {
    const Tensor& bias = ctx.input(3);
    TS_CHECK(bias.dtype() == x.dtype() && bias.rank() == 1 && bias.dim(0) == m, node.describe(),
             ": bias must have shape [", m, "]");
    const std::vector<double> bv = convutil::to_f64(bias);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t mi = 0; mi < m; ++mi)
        for (int64_t j = 0; j < out_size; ++j) y[static_cast<size_t>((b * m + mi) * out_size + j)] += bv[static_cast<size_t>(mi)];
  }
  std::vector<int64_t> shape{n, m};
  shape.insert(shape.end(), out.begin(), out.end());
  ctx.set_output(0, convutil::from_f64(x.dtype(), shape, y));
}

// ---- CausalConvWithState ----------------------------------------------------------------

bool is_causal_type(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

std::string causal_activation(const Node& n) {
  const std::string a = n.attr_string("activation", "none");
  TS_CHECK(a == "none" || a == "silu" || a == "swish", n.describe(), ": activation must be none, silu or swish, got '",
           a, "'");
  return a;
}

void causal_conv_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, is_causal_type, "float, float16 or bfloat16");
  causal_activation(ctx.node);
  for (size_t i = 1; i < 4; ++i)
    if (ctx.has_input(i)) TS_CHECK(ctx.input_dtype(i) == dt, ctx.node.describe(), ": input ", i, " dtype differs from input 0");
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    if (ctx.out_types.size() > 1) ctx.set_output_unknown_shape(1, dt);
    return;
  }
  const Shape& xs = ctx.input_shape(0);
  TS_CHECK(xs.size() == 3, ctx.node.describe(), ": input must have rank 3, got ", xs.size());
  ctx.set_output(0, dt, xs);
  if (ctx.out_types.size() > 1) {
    if (ctx.has_shape(1)) {
      const Shape& ws = ctx.input_shape(1);
      TS_CHECK(ws.size() == 3, ctx.node.describe(), ": weight must have rank 3, got ", ws.size());
      ctx.set_output(1, dt, {xs[0], xs[1], ws[2] - 1});
    } else {
      ctx.set_output_unknown_shape(1, dt);
    }
  }
}

void causal_conv_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  check_dtype(node, 0, x.dtype(), is_causal_type, "float, float16 or bfloat16");
  const bool silu = causal_activation(node) != "none";
  TS_CHECK(x.rank() == 3, node.describe(), ": input must have rank 3, got ", x.rank());
  const int64_t b = x.dim(0), c = x.dim(1), len = x.dim(2);
  TS_CHECK(w.dtype() == x.dtype() && w.rank() == 3 && w.dim(0) == c && w.dim(1) == 1 && w.dim(2) >= 1,
           node.describe(), ": weight must have shape [", c, ", 1, k], got ", dims_str(w.shape()));
  const int64_t k = w.dim(2), hist = k - 1, plen = len + hist;
  std::vector<double> bias(static_cast<size_t>(c), 0.0);
  if (ctx.has_input(2)) {
    const Tensor& bt = ctx.input(2);
    TS_CHECK(bt.dtype() == x.dtype() && bt.rank() == 1 && bt.dim(0) == c, node.describe(), ": bias must have shape [",
             c, "]");
    bias = convutil::to_f64(bt);
  }
  std::vector<double> past(static_cast<size_t>(b * c * hist), 0.0);
  if (ctx.has_input(3)) {
    const Tensor& ps = ctx.input(3);
    TS_CHECK(ps.dtype() == x.dtype() && ps.shape() == std::vector<int64_t>({b, c, hist}), node.describe(),
             ": past_state must have shape ", dims_str({b, c, hist}), ", got ", dims_str(ps.shape()));
    past = convutil::to_f64(ps);
  }
  const std::vector<double> xv = convutil::to_f64(x), wv = convutil::to_f64(w);
  std::vector<double> y(static_cast<size_t>(x.numel())), present(past.size());
  std::vector<double> padded(static_cast<size_t>(plen));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t ci = 0; ci < c; ++ci) {
      // The causal window: the carried history followed by this input.
      const int64_t plane = bi * c + ci;
      std::copy(past.begin() + plane * hist, past.begin() + (plane + 1) * hist, padded.begin());
      std::copy(xv.begin() + plane * len, xv.begin() + (plane + 1) * len, padded.begin() + hist);
      for (int64_t t = 0; t < len; ++t) {
        double acc = bias[static_cast<size_t>(ci)];
        for (int64_t j = 0; j < k; ++j) acc += wv[static_cast<size_t>(ci * k + j)] * padded[static_cast<size_t>(t + j)];
        y[static_cast<size_t>(plane * len + t)] = acc;
      }
      std::copy(padded.end() - hist, padded.end(), present.begin() + plane * hist);
    }
  Tensor out = convutil::from_f64(x.dtype(), x.shape(), y);
  if (silu) {
    // The activation applies to the conv result rounded to the input dtype.
    for (int64_t i = 0; i < out.numel(); ++i) {
      const double v = out.get_f64(i);
      out.set_f64(i, v / (1.0 + std::exp(-v)));
    }
  }
  ctx.set_output(0, std::move(out));
  if (ctx.output_wanted(1)) ctx.set_output(1, convutil::from_f64(x.dtype(), {b, c, hist}, present));
}

}  // namespace

void register_conv_extra_ops(OpRegistry& r) {
  r.add({"Col2Im", "", 3, 3, 1, 1, col2im_infer, col2im_kernel, nullptr, 18});
  r.add({"DeformConv", "", 3, 5, 1, 1, deform_conv_infer, deform_conv_kernel, nullptr, 19});
  r.add({"CausalConvWithState", "", 2, 4, 1, 2, causal_conv_infer, causal_conv_kernel, nullptr, 27});
}

}  // namespace tessel
