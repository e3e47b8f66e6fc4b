// Depthwise convolutions (one input channel per group: group == C, any
// channel multiplier) of 2-D images as direct kernels:
//
//   parallel for (n, m) over images and output channels
//     for oh
//       left border  | interior, vectorized over ow | right border
//       out[n, m, oh, ow] = epilogue(Σ_taps select(inside, x * w, 0))
//
// A depthwise conv has too little arithmetic per weight for a GEMM (K is
// the kernel size), so the work is the loads. The taps are unrolled into one
// sum (same order as the reduction loop: kh, then kw), and the output row is
// split so that in the interior no tap of a column reaches into the padding:
// there the simplifier, told the column's range, removes the clamps and the
// selects of the column axis, which leaves loads affine in ow (vector loads
// for stride 1). Only the row test, uniform across the vector, remains.
// The borders (pad columns) keep the full expression, scalar.
#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/group_lowerer.h"
#include "tessel/ops/conv/conv_util.h"

namespace tessel::lowering {

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The columns [lo, hi) of the output whose taps all read inside the input.
std::pair<int64_t, int64_t> interior_columns(const convutil::Window& w, int64_t in_w, int64_t out_w) {
  const int64_t s = w.strides[1], pad = w.pads[1], reach = (w.kernel[1] - 1) * w.dilations[1];
  const int64_t lo = std::min(out_w, std::max<int64_t>(0, floor_div(pad + s - 1, s)));
  const int64_t hi = std::clamp<int64_t>(floor_div(in_w - 1 + pad - reach, s) + 1, lo, out_w);
  return {lo, hi};
}

}  // namespace

std::optional<LoweredGroup> GroupLowerer::lower_depthwise(const Node& c) {
  const Value* out = group_.root->outputs.at(group_.root_output);
  const Value* x = c.inputs.at(0);
  const Value* w = c.inputs.at(1);
  if (!out->type.has_shape() || !x->type.has_shape() || !w->type.has_shape()) return std::nullopt;
  if (*out->type.shape != *c.outputs.at(0)->type.shape) return std::nullopt;
  const Shape &dims = *out->type.shape, &xd = *x->type.shape, &wd = *w->type.shape;
  if (dims.size() != 4 || xd.size() != 4 || wd.size() != 4) return std::nullopt;
  for (const Shape* s : {&dims, &xd, &wd})
    for (size_t d = 1; d < 4; ++d)
      if (!(*s)[d].is_const()) return std::nullopt;
  if (wd[1].value() != 1 || c.attr_int("group", 1) != xd[1].value()) return std::nullopt;
  const std::vector<int64_t> kernel{wd[2].value(), wd[3].value()}, in{xd[2].value(), xd[3].value()};
  convutil::Window win = convutil::read_window(c, 2, &kernel, true, false);
  convutil::forward_out_sizes(win, in, c);
  const int64_t OC = dims[1].value(), OH = dims[2].value(), OW = dims[3].value();

  // Probe the tap (x, w and the padding test), then the element at (n, m,
  // oh, ow) with the reduction replaced by the unrolled sum of the taps.
  const Expr n = loop::var("dn"), m = loop::var("dm"), oh = loop::var("doh"), ow = loop::var("dow");
  const Idx index{n, m, oh, ow};
  if (!probe_conv(c, index)) return std::nullopt;
  const Expr zero = loop::float_imm(DType::F32, 0);
  const Expr tap = conv_.inside.defined() ? loop::select(conv_.inside, gemm_.a * gemm_.b, zero) : gemm_.a * gemm_.b;
  Expr sum = zero;
  for (int64_t kh = 0; kh < kernel[0]; ++kh)
    for (int64_t kw = 0; kw < kernel[1]; ++kw) {
      loop::VarMap at;
      if (conv_.ks[1]->kind == loop::ExprKind::Var) at[conv_.ks[1]->name] = Expr(kh);
      if (conv_.ks[2]->kind == loop::ExprKind::Var) at[conv_.ks[2]->name] = Expr(kw);
      sum = sum + loop::substitute(tap, at);
    }
  gemm_.probing = false;
  gemm_.acc = sum;
  memo_.clear();
  levels_.assign(1, Level{});
  const Expr v = value_at(out, index);
  loop::BufferRef out_buf = make_buffer(str_cat("out", params_.size()), out->type.dtype, shape_of(out),
                                        loop::BufferScope::Param);
  std::vector<Stmt> stmts = levels_[0].stmts;
  stmts.push_back(loop::store(out_buf, index, v));
  const Stmt element = wrap_allocs(levels_[0].allocs, loop::seq(stmts));

  loop::Bounds bounds{{m->name, {0, OC - 1}}, {oh->name, {0, OH - 1}}};
  if (dims[0].is_const() && dims[0].value() > 0) bounds[n->name] = {0, dims[0].value() - 1};
  // Columns [lo, hi) as a serial loop, or vectorized over `lanes` (hi - lo
  // a multiple of it): the element simplified for that range of ow.
  const auto columns = [&](int64_t lo, int64_t hi, int lanes) {
    if (hi <= lo) return loop::no_op();
    loop::Bounds b = bounds;
    b[ow->name] = {lo, hi - 1};
    const Stmt body = loop::simplify(element, b);
    if (lanes == 1) {
      const std::string col = fresh("dow");  // loop variables are unique in a kernel
      return loop::for_loop(col, Expr(lo), Expr(hi - lo), loop::ForKind::Serial,
                            loop::substitute(body, {{ow->name, loop::var(col)}}));
    }
    const std::string vo = fresh("dvo"), vl = fresh("dvl");
    const Stmt lane = loop::substitute(body, {{ow->name, Expr(lo) + loop::var(vo) * Expr(lanes) + loop::var(vl)}});
    return loop::for_loop(vo, Expr(0), Expr((hi - lo) / lanes), loop::ForKind::Serial,
                          loop::for_loop(vl, Expr(0), Expr(lanes), loop::ForKind::Vectorized, lane));
  };
  const auto [lo, hi] = interior_columns(win, in[1], OW);
  const int lanes = std::max(1, sched_.cpu.vector_lanes_f32);
  const int64_t vec_end = lo + (hi - lo) / lanes * lanes;
  // The interior's last hi - vec_end columns: one more vector ending at hi,
  // over columns the loop before it wrote already (the same values again:
  // the element reads no output, and a depthwise kernel's output never
  // shares storage with its input), where a scalar loop would take a vector's
  // time per column.
  const Stmt rest = vec_end > lo && vec_end < hi ? columns(hi - lanes, hi, lanes) : columns(vec_end, hi, 1);
  const Stmt row = loop::seq({columns(0, lo, 1), columns(lo, vec_end, lanes), rest, columns(hi, OW, 1)});
  const std::string q = fresh("dq");
  Stmt plane = loop::for_loop(oh->name, Expr(0), Expr(OH), loop::ForKind::Serial, row);
  plane = loop::let(n->name, loop::floordiv(loop::var(q), Expr(OC)),
                    loop::let(m->name, loop::floormod(loop::var(q), Expr(OC)), plane));
  const loop::ForKind kind = sched_.parallel ? loop::ForKind::Parallel : loop::ForKind::Serial;
  const Stmt body = loop::for_loop(q, Expr(0), shape_of(out)[0] * Expr(OC), kind, plane);
  std::optional<Dim> parallel_extent;
  if (sched_.parallel) parallel_extent = dims[0] * Dim(OC);
  gemm_ = GemmCapture{};
  conv_ = ConvCapture{};
  LoweredGroup lg = finish(body, out_buf, parallel_extent);
  lg.schedule = "depthwise";
  return lg;
}

}  // namespace tessel::lowering
