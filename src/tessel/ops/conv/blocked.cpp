// tessel::ToBlocked and tessel::FromBlocked: an activation [N, C, S...] in
// the channel-blocked layout NC[S]b, whose innermost axis holds b
// consecutive channels (b = the CPU's vector width in floats). The CPU
// target's blocked_layout pass (passes/) stores the values between
// convolutions so: a convolution's output tile of 16 channels is then one
// contiguous store, its input taps 16 consecutive channels, and an
// elementwise or pooling kernel vectorises over the block.
//
//   ToBlocked   X [N, C, S...] -> Y [N, ceil(C / b), S..., b]
//               Y[n, cb, s..., l] = X[n, cb b + l, s...], 0 where cb b + l >= C
//               attribute block (b, default 16)
//   FromBlocked Y [N, CB, S..., b] -> X [N, C, S...]
//               X[n, c, s...] = Y[n, c / b, s..., c % b]
//               attribute channels (C, required; CB b >= C)
//
// FromBlocked(ToBlocked(x)) is x. Both are index expressions: ToBlocked
// (fusion kind Materialized) takes its producers into its kernel and is
// stored, FromBlocked (Injective) joins its consumer's kernel, so that a
// blocked value costs no pass over memory of its own.
#include <cstring>

#include "tessel/ops/registry.h"

namespace tessel {

namespace {

constexpr int64_t kMaxBlock = 64;

int64_t block_of(const Node& n) {
  const int64_t b = n.attr_int("block", 16);
  TS_CHECK(b >= 1 && b <= kMaxBlock, n.describe(), ": block must be 1 to ", kMaxBlock);
  return b;
}

int64_t channels_of(const Node& n) {
  const int64_t c = n.attr_int("channels", -1);
  TS_CHECK(c >= 1, n.describe(), ": channels must be a positive integer");
  return c;
}

void to_blocked_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const int64_t b = block_of(ctx.node);
  if (!ctx.has_shape(0)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& x = ctx.input_shape(0);
  TS_CHECK(x.size() >= 3, ctx.node.describe(), ": input must have rank 3 or more (N, C, spatial...)");
  TS_CHECK(x[1].is_const(), ctx.node.describe(), ": the channel count must be constant");
  Shape y{x[0], Dim((x[1].value() + b - 1) / b)};
  y.insert(y.end(), x.begin() + 2, x.end());
  y.push_back(Dim(b));
  ctx.set_output(0, dt, y);
}

void from_blocked_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const int64_t c = channels_of(ctx.node);
  if (!ctx.has_shape(0)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& y = ctx.input_shape(0);
  TS_CHECK(y.size() >= 4, ctx.node.describe(), ": input must have rank 4 or more (N, CB, spatial..., block)");
  TS_CHECK(y[1].is_const() && y.back().is_const(), ctx.node.describe(), ": the blocks must be constant");
  TS_CHECK(y[1].value() * y.back().value() >= c && (y[1].value() - 1) * y.back().value() < c, ctx.node.describe(),
           ": ", y[1].value(), " blocks of ", y.back().value(), " do not hold exactly ceil(", c, " / block) blocks");
  Shape x{y[0], Dim(c)};
  x.insert(x.end(), y.begin() + 2, y.end() - 1);
  ctx.set_output(0, dt, x);
}

// Copies between the plain [N, C, P] and the blocked [N, CB, P, b] views
// (P = the spatial dims flattened); `to` picks the direction. Channels past
// C in the blocked tensor are zero.
void copy_blocks(const Tensor& from, Tensor* to, int64_t n, int64_t c, int64_t p, int64_t b, bool blocking) {
  const size_t es = static_cast<size_t>(dtype_storage_size(from.dtype()));
  const int64_t cb = (c + b - 1) / b;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t s = 0; s < p; ++s) {
        const int64_t plain = (i * c + ch) * p + s;
        const int64_t blocked = ((i * cb + ch / b) * p + s) * b + ch % b;
        const int64_t src = blocking ? plain : blocked, dst = blocking ? blocked : plain;
        std::memcpy(to->mutable_raw() + static_cast<size_t>(dst) * es, from.raw() + static_cast<size_t>(src) * es, es);
      }
}

int64_t spatial_size(const std::vector<int64_t>& dims, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= dims[d];
  return p;
}

void to_blocked_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t b = block_of(ctx.node);
  TS_CHECK(x.rank() >= 3, ctx.node.describe(), ": input must have rank 3 or more");
  const std::vector<int64_t>& xd = x.shape();
  std::vector<int64_t> yd{xd[0], (xd[1] + b - 1) / b};
  yd.insert(yd.end(), xd.begin() + 2, xd.end());
  yd.push_back(b);
  Tensor y(x.dtype(), yd);  // zero-filled: the channels past C stay 0
  copy_blocks(x, &y, xd[0], xd[1], spatial_size(xd, 2, xd.size()), b, true);
  ctx.set_output(0, std::move(y));
}

void from_blocked_kernel(KernelContext& ctx) {
  const Tensor& y = ctx.input(0);
  const int64_t c = channels_of(ctx.node);
  TS_CHECK(y.rank() >= 4, ctx.node.describe(), ": input must have rank 4 or more");
  const std::vector<int64_t>& yd = y.shape();
  const int64_t b = yd.back();
  TS_CHECK(yd[1] == (c + b - 1) / b, ctx.node.describe(), ": ", yd[1], " blocks of ", b, " do not hold ", c,
           " channels");
  std::vector<int64_t> xd{yd[0], c};
  xd.insert(xd.end(), yd.begin() + 2, yd.end() - 1);
  Tensor x(y.dtype(), xd);
  copy_blocks(y, &x, yd[0], c, spatial_size(yd, 2, yd.size() - 1), b, false);
  ctx.set_output(0, std::move(x));
}

// Y[n, cb, s..., l] = X[n, cb b + l, s...]; past C a zero (and a clamped
// channel, safe to load).
loop::Expr lower_to_blocked(LowerContext& ctx, size_t, const std::vector<loop::Expr>& index) {
  const int64_t b = block_of(ctx.node);
  const int64_t c = const_in_dims(ctx, 0, 1).at(0);
  const loop::Expr ch = index[1] * loop::Expr(b) + index.back();
  std::vector<loop::Expr> at{index[0], ch};
  at.insert(at.end(), index.begin() + 2, index.end() - 1);
  if (c % b == 0) return ctx.input(0, at);
  at[1] = clamp_index(ch, loop::Expr(0), loop::Expr(c - 1));
  return loop::select(in_range(ch, loop::Expr(0), loop::Expr(c)), ctx.input(0, at),
                      constant(ctx.node.outputs.at(0)->type.dtype, 0));
}

loop::Expr lower_from_blocked(LowerContext& ctx, size_t, const std::vector<loop::Expr>& index) {
  const int64_t b = const_in_dims(ctx, 0).back();
  std::vector<loop::Expr> at{index[0], loop::floordiv(index[1], loop::Expr(b))};
  at.insert(at.end(), index.begin() + 2, index.end());
  at.push_back(loop::floormod(index[1], loop::Expr(b)));
  return ctx.input(0, at);
}

}  // namespace

void register_blocked_layout_ops(OpRegistry& r) {
  r.add({"ToBlocked", "tessel", 1, 1, 1, 1, to_blocked_infer, to_blocked_kernel, nullptr, 1});
  r.set_lowering("tessel", "ToBlocked", FusionKind::Materialized, lower_to_blocked);
  r.add({"FromBlocked", "tessel", 1, 1, 1, 1, from_blocked_infer, from_blocked_kernel, nullptr, 1});
  r.set_lowering("tessel", "FromBlocked", FusionKind::Injective, lower_from_blocked);
}

}  // namespace tessel
