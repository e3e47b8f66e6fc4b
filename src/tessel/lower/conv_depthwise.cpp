// Depthwise convolutions (one input channel per group: group == C, any
// channel multiplier) of 2-D images as direct kernels:
//
//   parallel for (n, m) over images and output channels
//     top border rows | interior rows in blocks of R | bottom border rows
//       for each vector of L output columns (the last may overlap the one
//       before it; a row narrower than L is one vector, stored masked)
//         r_i = epilogue(taps of row oh + i, fma-chained), i < R
//         out[n, m, oh + i, ow .. ow + L) = r_i
//
// A depthwise conv has too little arithmetic per weight for a GEMM (K is
// the kernel size), so the work is the loads. The taps are unrolled into one
// chain of fmas (same order as the reduction loop: kh, then kw). Each piece
// of the plane is simplified for its range of rows and columns: in the
// interior (no tap in the padding) the padding tests and clamps vanish and
// the loads are affine in ow (vector loads for stride 1, a load and a
// shuffle for stride 2); in the border rows the row tests are constants;
// in a border column's vector they remain as lane masks, and the tap's
// load, under its select, is masked (codegen: a select's arms run under its
// lanes' mask), so whole rows are vectors, borders included. The R rows of
// a block are computed before any is stored, so that LLVM reads an input
// row the block's rows share once (register blocking along the rows).
//
// L is the smallest power of two that holds a row, at most the target's
// vector (a 7-wide row is one 8-lane vector, not seven scalars); R and L
// are the knobs depthwise.tile rows= lanes=.
#include <algorithm>

#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/group_lowerer.h"
#include "tessel/ops/conv/conv_util.h"

namespace tessel::lowering {

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The outputs [lo, hi) along spatial axis d whose taps all read inside the
// input (lo <= hi; both within [0, out)).
std::pair<int64_t, int64_t> interior(const convutil::Window& w, size_t d, int64_t in, int64_t out) {
  const int64_t s = w.strides[d], pad = w.pads[d], reach = (w.kernel[d] - 1) * w.dilations[d];
  const int64_t lo = std::min(out, std::max<int64_t>(0, floor_div(pad + s - 1, s)));
  const int64_t hi = std::clamp<int64_t>(floor_div(in - 1 + pad - reach, s) + 1, lo, out);
  return {lo, hi};
}

// The load `e` (the conv's input read in place) with the clamps of its
// last index (the column) removed; `e` itself when it is not a load.
Expr unclamped_last_index(const Expr& e) {
  if (e->kind != loop::ExprKind::Load || e->args.empty()) return e;
  Expr col = e->args.back();
  int64_t c = 0;
  while (col->kind == loop::ExprKind::Binary &&
         (col->binary == loop::BinaryOp::Min || col->binary == loop::BinaryOp::Max) &&
         (loop::as_const_int(col->args[0], &c) || loop::as_const_int(col->args[1], &c)))
    col = loop::as_const_int(col->args[1], &c) ? col->args[0] : col->args[1];
  std::vector<Expr> args = e->args;
  args.back() = col;
  return loop::load(e->buffer, args);
}

bool is_zero(const Expr& e) { return e->kind == loop::ExprKind::FloatImm && e->float_value == 0; }

// `e` without the taps that simplification found in the padding (their x
// is 0): fma(0, w, acc) => acc, acc + 0 * w => acc (a tap in the padding
// adds nothing, as in the reduction's select).
Expr drop_padding_taps(const Expr& e) {
  const Expr x = loop::map_args(e, [](const Expr& a) { return drop_padding_taps(a); });
  if (x->kind == loop::ExprKind::Call && x->name == "fma" && (is_zero(x->args[0]) || is_zero(x->args[1])))
    return x->args[2];
  if (x->kind == loop::ExprKind::Binary && x->binary == loop::BinaryOp::Add && x->args[1]->kind == loop::ExprKind::Binary &&
      x->args[1]->binary == loop::BinaryOp::Mul && (is_zero(x->args[1]->args[0]) || is_zero(x->args[1]->args[1])))
    return x->args[0];
  return x;
}

Stmt drop_padding_taps(const Stmt& s) {
  return loop::map_stmt(s, [](const Expr& e) { return drop_padding_taps(e); },
                        [](const Stmt& c) { return drop_padding_taps(c); });
}

// The element's loads that stay the same over a plane (the weights, a
// bias: indices of neither oh nor ow, plain variables and constants),
// each bound once per plane to a variable: read once per channel rather
// than once per vector, and never under a lane mask (a uniform load under
// a mask is a gather).
class PlaneInvariants {
 public:
  PlaneInvariants(std::string oh, std::string ow, std::function<std::string()> fresh)
      : oh_(std::move(oh)), ow_(std::move(ow)), fresh_(std::move(fresh)) {}

  Expr hoist(const Expr& e) {
    const Expr x = loop::map_args(e, [&](const Expr& a) { return hoist(a); });
    if (x->kind != loop::ExprKind::Load || x->buffer->scope != loop::BufferScope::Param) return x;
    for (const Expr& i : x->args) {
      bool plain = true;
      loop::visit_expr(i, [&](const Expr& y) {
        if (y->kind == loop::ExprKind::Var && (y->name == oh_ || y->name == ow_)) plain = false;
        if (y->kind != loop::ExprKind::Var && y->kind != loop::ExprKind::IntImm &&
            !(y->kind == loop::ExprKind::Binary && (y->binary == loop::BinaryOp::Add || y->binary == loop::BinaryOp::Mul)))
          plain = false;
      });
      if (!plain) return x;
    }
    for (const auto& [name, load] : lets_)
      if (loop::equal(load, x)) return loop::var(name, x.dtype());
    lets_.emplace_back(fresh_(), x);
    return loop::var(lets_.back().first, x.dtype());
  }

  Stmt bind(Stmt body) const {
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) body = loop::let(it->first, it->second, body);
    return body;
  }

 private:
  std::string oh_, ow_;
  std::function<std::string()> fresh_;
  std::vector<std::pair<std::string, Expr>> lets_;
};

// Rows per block by default: two share two of a 3x3's three input rows.
// MobileNet-V2 with 1, 2 and 4 (--knob depthwise.tile.rows) measured within
// the noise of each other on a busy Zen 4; the tuner searches 1-4.
constexpr int kDefaultRows = 2;

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
  // oh, ow) with the reduction replaced by the chain of the taps.
  const Expr n = loop::var("dn"), m = loop::var("dm"), oh = loop::var("doh"), ow = loop::var("dow");
  const Idx index{n, m, oh, ow};
  if (!probe_conv(c, group_.root->outputs.at(group_.root_output), index)) return std::nullopt;
  Expr xt = gemm_.a, wt = gemm_.b;  // the factor that reads the input moves with ow
  if (!loop::mentions_var(xt, ow->name)) std::swap(xt, wt);
  const bool fma = sched_.cpu.has_fma;
  const Expr zero = loop::float_imm(DType::F32, 0);
  // The element with the input's column index clamped as the probe wrote
  // it, or not (`free`: for vectors, where the padding test of a border
  // column is a lane mask under which the tap's load reads nothing).
  const auto element_value = [&](bool free) {
    Expr x_tap = xt;
    if (free) x_tap = unclamped_last_index(xt);
    Expr sum = zero;
    for (int64_t kh = 0; kh < kernel[0]; ++kh)
      for (int64_t kw = 0; kw < kernel[1]; ++kw) {
        loop::VarMap at;
        if (conv_.ks[1]->kind == loop::ExprKind::Var) at[conv_.ks[1]->name] = Expr(kh);
        if (conv_.ks[2]->kind == loop::ExprKind::Var) at[conv_.ks[2]->name] = Expr(kw);
        Expr xv = loop::substitute(x_tap, at);
        const Expr wv = loop::substitute(wt, at);
        // A tap in the padding reads 0 (as ONNX pads with zeros).
        if (conv_.inside.defined()) xv = loop::select(loop::substitute(conv_.inside, at), xv, zero);
        sum = fma ? loop::call("fma", DType::F32, {xv, wv, sum}) : sum + xv * wv;
      }
    gemm_.probing = false;
    gemm_.acc = sum;
    memo_.clear();
    levels_.assign(1, Level{});
    return value_at(out, index);
  };
  Expr v_free = element_value(true);
  Expr v = element_value(false);
  loop::BufferRef out_buf = make_buffer(str_cat("out", params_.size()), out->type.dtype, shape_of(out),
                                        loop::BufferScope::Param);
  // Row blocks need the element as one expression (the group left no
  // statements of its own, e.g. a reduction's accumulator, at its level).
  const bool plain = levels_[0].stmts.empty() && levels_[0].allocs.empty();
  PlaneInvariants invariants(oh->name, ow->name, [&] { return fresh("dw"); });
  if (plain) {
    v = invariants.hoist(v);
    v_free = invariants.hoist(v_free);
  }

  // The knobs.
  int lanes_max = std::max(1, sched_.cpu.vector_lanes_f32);
  int rows = kDefaultRows;
  if (sched_.tuned)
    if (const Primitive* p = sched_.tuned->find("depthwise.tile")) {
      rows = static_cast<int>(p->int_attr("rows", rows));
      lanes_max = static_cast<int>(p->int_attr("lanes", lanes_max));
    }
  if (!plain) rows = 1;
  int lanes = 1;
  while (lanes < lanes_max && lanes < OW) lanes *= 2;
  if (lanes < 2) lanes = 1;

  loop::Bounds plane{{m->name, {0, OC - 1}}};
  if (dims[0].is_const() && dims[0].value() > 0) plane[n->name] = {0, dims[0].value() - 1};

  // The vectors of a row: (first column, count, step); count > 1 only for
  // runs of interior vectors, which become a loop.
  struct Run {
    int64_t start, count;
  };
  const auto [clo, chi] = interior(win, 1, in[1], OW);
  std::vector<Run> runs;
  if (lanes == 1) {
    runs.push_back({0, OW});
  } else if (OW <= lanes) {
    runs.push_back({0, 1});
  } else {
    std::vector<int64_t> starts;
    for (int64_t s = 0; s + lanes <= OW; s += lanes) starts.push_back(s);
    if (OW % lanes != 0) starts.push_back(OW - lanes);
    for (int64_t s : starts) {
      const bool inner = s >= clo && s + lanes <= chi;
      if (inner && !runs.empty()) {
        Run& r = runs.back();
        const int64_t prev = r.start + (r.count - 1) * lanes;
        if (prev + lanes == s && prev >= clo && prev + lanes <= chi) {
          ++r.count;
          continue;
        }
      }
      runs.push_back({s, 1});
    }
  }

  // The rows `oh_at(i)`, i < block, over the columns of every run; the
  // element simplified where oh is in `rows_range`.
  const auto sweep = [&](const loop::Interval& rows_range, int block, const std::function<Expr(int)>& oh_at) {
    std::vector<Stmt> pieces;
    for (const Run& r : runs) {
      loop::Bounds b = plane;
      b[oh->name] = rows_range;
      const int64_t step = lanes == 1 ? 1 : lanes;
      b[ow->name] = {r.start, std::min(OW, r.start + r.count * step) - 1};
      const std::string vo = fresh("dvo"), vl = fresh("dvl");
      Expr col;
      if (lanes == 1) {
        col = loop::var(vo);
      } else {
        col = Expr(r.start) + loop::var(vl);
        if (r.count > 1) col = Expr(r.start) + loop::var(vo) * Expr(lanes) + loop::var(vl);
      }
      Stmt body;
      const Expr& value = lanes == 1 || !plain ? v : v_free;
      if (block == 1 || !plain) {
        std::vector<Stmt> st = levels_[0].stmts;
        st.push_back(loop::store(out_buf, index, value));
        const Stmt element = wrap_allocs(levels_[0].allocs, loop::seq(st));
        const Stmt simple = drop_padding_taps(loop::simplify(element, b));
        body = loop::substitute(simple, {{ow->name, col}, {oh->name, oh_at(0)}});
      } else {
        const Expr e = drop_padding_taps(loop::simplify(value, b));
        std::vector<std::string> names;
        std::vector<Stmt> stores;
        for (int i = 0; i < block; ++i) {
          names.push_back(fresh("dr"));
          Idx at{n, m, oh_at(i), col};
          stores.push_back(loop::store(out_buf, at, loop::var(names.back(), out->type.dtype)));
        }
        body = loop::seq(stores);
        for (int i = block; i-- > 0;)
          body = loop::let(names[i], loop::substitute(e, {{ow->name, col}, {oh->name, oh_at(i)}}), body);
      }
      if (lanes == 1) {
        pieces.push_back(loop::for_loop(vo, Expr(r.start), Expr(r.count), loop::ForKind::Serial, body));
        continue;
      }
      // A row narrower than the vector: the lanes past it neither load nor store.
      if (r.start + lanes > OW)
        body = loop::if_then(loop::binary(loop::BinaryOp::Lt, loop::var(vl), Expr(OW - r.start)), body);
      Stmt vec = loop::for_loop(vl, Expr(0), Expr(lanes), loop::ForKind::Vectorized, body);
      if (r.count > 1) vec = loop::for_loop(vo, Expr(0), Expr(r.count), loop::ForKind::Serial, vec);
      pieces.push_back(vec);
    }
    return loop::seq(pieces);
  };

  // Border rows one by one where they are few (their row tests become
  // constants), else as a loop; interior rows in blocks.
  std::vector<Stmt> plane_rows;
  const auto border = [&](int64_t lo, int64_t hi) {
    if (hi <= lo) return;
    if (hi - lo <= 4) {
      for (int64_t r = lo; r < hi; ++r) plane_rows.push_back(sweep({r, r}, 1, [r](int) { return Expr(r); }));
      return;
    }
    const std::string rv = fresh("dor");
    plane_rows.push_back(loop::for_loop(rv, Expr(lo), Expr(hi - lo), loop::ForKind::Serial,
                                        sweep({lo, hi - 1}, 1, [&](int) { return loop::var(rv); })));
  };
  const auto [rlo, rhi] = interior(win, 0, in[0], OH);
  border(0, rlo);
  if (rhi > rlo) {
    const int block = std::max(1, std::min<int>(rows, static_cast<int>(rhi - rlo)));
    const int64_t blocks = (rhi - rlo) / block;
    const std::string rb = fresh("dob");
    const Expr base = Expr(rlo) + loop::var(rb) * Expr(block);
    plane_rows.push_back(loop::for_loop(rb, Expr(0), Expr(blocks), loop::ForKind::Serial,
                                        sweep({rlo, rhi - 1}, block, [&](int i) { return base + Expr(i); })));
    const int64_t rest = rlo + blocks * block;
    if (rest < rhi) {
      const std::string rv = fresh("dor");
      plane_rows.push_back(loop::for_loop(rv, Expr(rest), Expr(rhi - rest), loop::ForKind::Serial,
                                          sweep({rest, rhi - 1}, 1, [&](int) { return loop::var(rv); })));
    }
  }
  border(std::max(rlo, rhi), OH);

  const std::string q = fresh("dq");
  Stmt body = loop::let(n->name, loop::floordiv(loop::var(q), Expr(OC)),
                        loop::let(m->name, loop::floormod(loop::var(q), Expr(OC)),
                                  invariants.bind(loop::seq(plane_rows))));
  const loop::ForKind kind = sched_.parallel ? loop::ForKind::Parallel : loop::ForKind::Serial;
  body = loop::for_loop(q, Expr(0), shape_of(out)[0] * Expr(OC), kind, body);
  std::optional<Dim> parallel_extent;
  if (sched_.parallel) parallel_extent = dims[0] * Dim(OC);
  gemm_ = GemmCapture{};
  conv_ = ConvCapture{};
  LoweredGroup lg = finish(body, out_buf, parallel_extent);
  lg.schedule = "depthwise";
  Primitive& tile = lg.sched.get("depthwise.tile");
  tile.set("rows", rows);
  tile.set("lanes", lanes_max);
  return lg;
}

}  // namespace tessel::lowering
