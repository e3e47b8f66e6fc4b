// tessel::Im2Col: the patches of a 2-D convolution, one row per output
// position, stored. The CUDA target's conv_im2col pass (passes/) turns a Conv
// whose implicit-GEMM operand would be read one element at a time (NCHW with
// 7x7 or 14x14 images, 3x3 taps) into Im2Col + MatMul: the GEMM then reads
// both operands in 16-byte vectors on its cp.async pipeline, and the patches
// cost one pass over memory.
//
//   X [N, C, H, W] -> Y [N, OH * OW, Kp]
//   Y[n, oh * OW + ow, (c * KH + kh) * KW + kw] =
//       X[n, c, oh * sh - pt + kh * dh, ow * sw - pl + kw * dw]   (0 outside X)
//   Y[n, p, k] = 0 for C * KH * KW <= k < Kp
//
// or, with k_major = 1, the same values as Y [N, Kp, OH * OW] (Y[n, k, p]):
// a thread then writes consecutive positions, which for a stride-1
// convolution read consecutive input columns of one channel and tap, so
// both sides of the copy coalesce and the tap's (c, kh, kw) is computed once
// a vector rather than per element (the GEMM reads it as B [K, N], N-major).
//
// Attributes: kernel_shape [KH, KW], strides [sh, sw], pads [pt, pl, pb,
// pr], dilations [dh, dw], k_padded (Kp >= C * KH * KW), all required;
// k_major (default 0).
// Its fusion kind is Materialized: producers join it, but it never joins a
// GEMM's operand (which would make it implicit again).
#include <cstring>

#include "tessel/ops/registry.h"

namespace tessel {

namespace {

struct Patch {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1, kp = 0;
  bool k_major = false;
};

Patch read_patch(const Node& n) {
  const auto two = [&](const char* name) {
    const std::vector<int64_t> v = n.attr_ints(name);
    TS_CHECK(v.size() == 2 && v[0] >= 1 && v[1] >= 1, n.describe(), ": ", name, " must be two positive integers");
    return v;
  };
  Patch p;
  const std::vector<int64_t> k = two("kernel_shape"), s = two("strides"), d = two("dilations");
  const std::vector<int64_t> pads = n.attr_ints("pads");
  TS_CHECK(pads.size() == 4 && pads[0] >= 0 && pads[1] >= 0 && pads[2] >= 0 && pads[3] >= 0, n.describe(),
           ": pads must be four non-negative integers");
  p.kh = k[0], p.kw = k[1], p.sh = s[0], p.sw = s[1], p.dh = d[0], p.dw = d[1];
  p.pt = pads[0], p.pl = pads[1], p.pb = pads[2], p.pr = pads[3];
  p.kp = n.attr_int("k_padded", 0);
  const int64_t k_major = n.attr_int("k_major", 0);
  TS_CHECK(k_major == 0 || k_major == 1, n.describe(), ": k_major must be 0 or 1");
  p.k_major = k_major == 1;
  return p;
}

// Output size along one axis; throws when the window does not fit.
int64_t out_size(const Node& n, int64_t in, int64_t lo, int64_t hi, int64_t k, int64_t s, int64_t d) {
  const int64_t span = in + lo + hi - d * (k - 1) - 1;
  TS_CHECK(span >= 0, n.describe(), ": the kernel does not fit the padded input");
  return span / s + 1;
}

void im2col_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const Patch p = read_patch(ctx.node);
  if (!ctx.has_shape(0)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& x = ctx.input_shape(0);
  TS_CHECK(x.size() == 4, ctx.node.describe(), ": input must have rank 4");
  TS_CHECK(x[1].is_const() && x[2].is_const() && x[3].is_const(), ctx.node.describe(),
           ": channels and image size must be constant");
  const int64_t k = x[1].value() * p.kh * p.kw;
  TS_CHECK(p.kp >= k, ctx.node.describe(), ": k_padded (", p.kp, ") is below C * KH * KW (", k, ")");
  const int64_t oh = out_size(ctx.node, x[2].value(), p.pt, p.pb, p.kh, p.sh, p.dh);
  const int64_t ow = out_size(ctx.node, x[3].value(), p.pl, p.pr, p.kw, p.sw, p.dw);
  if (p.k_major) return ctx.set_output(0, dt, {x[0], Dim(p.kp), Dim(oh * ow)});
  ctx.set_output(0, dt, {x[0], Dim(oh * ow), Dim(p.kp)});
}

// Copies element bytes: any dtype, zeros (all-zero bytes) outside.
void im2col_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Patch p = read_patch(ctx.node);
  TS_CHECK(x.rank() == 4, ctx.node.describe(), ": input must have rank 4");
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t oh = out_size(ctx.node, h, p.pt, p.pb, p.kh, p.sh, p.dh);
  const int64_t ow = out_size(ctx.node, w, p.pl, p.pr, p.kw, p.sw, p.dw);
  TS_CHECK(p.kp >= c * p.kh * p.kw, ctx.node.describe(), ": k_padded is below C * KH * KW");
  Tensor y(x.dtype(), p.k_major ? std::vector<int64_t>{n, p.kp, oh * ow} : std::vector<int64_t>{n, oh * ow, p.kp});
  const size_t es = static_cast<size_t>(dtype_storage_size(x.dtype()));
  std::memset(y.mutable_raw(), 0, y.nbytes());
  const uint8_t* src = x.raw();
  uint8_t* dst = y.mutable_raw();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t q = 0; q < oh * ow; ++q)
      for (int64_t k = 0; k < c * p.kh * p.kw; ++k) {
        const int64_t ch = k / (p.kh * p.kw), ky = k / p.kw % p.kh, kx = k % p.kw;
        const int64_t iy = q / ow * p.sh - p.pt + ky * p.dh, ix = q % ow * p.sw - p.pl + kx * p.dw;
        if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
        const int64_t at = p.k_major ? (b * p.kp + k) * oh * ow + q : (b * oh * ow + q) * p.kp + k;
        std::memcpy(dst + static_cast<size_t>(at) * es,
                    src + static_cast<size_t>(((b * c + ch) * h + iy) * w + ix) * es, es);
      }
  ctx.set_output(0, std::move(y));
}

loop::Expr lower_im2col(LowerContext& ctx, size_t, const std::vector<loop::Expr>& index) {
  using loop::Expr;
  const Patch p = read_patch(ctx.node);
  const std::vector<int64_t> x = const_in_dims(ctx, 0, 1);  // C, H, W
  const int64_t ow = ctx.node.outputs[0]->type.shape->at(p.k_major ? 2 : 1).value() /
                     out_size(ctx.node, x[1], p.pt, p.pb, p.kh, p.sh, p.dh);
  const Expr& q = index[p.k_major ? 2 : 1];
  const Expr& k = index[p.k_major ? 1 : 2];
  const Expr ch = loop::floordiv(k, Expr(p.kh * p.kw));
  const Expr ky = loop::floormod(loop::floordiv(k, Expr(p.kw)), Expr(p.kh)), kx = loop::floormod(k, Expr(p.kw));
  const Expr iy = loop::floordiv(q, Expr(ow)) * Expr(p.sh) + Expr(-p.pt) + ky * Expr(p.dh);
  const Expr ix = loop::floormod(q, Expr(ow)) * Expr(p.sw) + Expr(-p.pl) + kx * Expr(p.dw);
  const Expr inside = loop::binary(
      loop::BinaryOp::And, in_range(k, Expr(0), Expr(x[0] * p.kh * p.kw)),
      loop::binary(loop::BinaryOp::And, in_range(iy, Expr(0), Expr(x[1])), in_range(ix, Expr(0), Expr(x[2]))));
  const Expr v = ctx.input(0, {index[0], clamp_index(ch, Expr(0), Expr(x[0] - 1)), clamp_index(iy, Expr(0), Expr(x[1] - 1)),
                               clamp_index(ix, Expr(0), Expr(x[2] - 1))});
  return loop::select(inside, v, constant(v.dtype(), 0));
}

}  // namespace

void register_im2col_op(OpRegistry& r) {
  r.add({"Im2Col", "tessel", 1, 1, 1, 1, im2col_infer, im2col_kernel, nullptr, 1});
  r.set_lowering("tessel", "Im2Col", FusionKind::Materialized, lower_im2col);
}

}  // namespace tessel
