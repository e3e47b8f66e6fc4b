// The attention path of the lowering engine (NestSchedule::gpu_attention):
// a group whose root is an ONNX Attention node becomes one loop IR
// attention statement (loop/ir.h) instead of the node's composed
// reductions (ops/attention/attention_lower.cpp), which is what a flash-attention
// kernel takes (docs/flash_attention.md).
//
// The statement's batch variable runs over batch x query heads; q, k and v
// are the node's inputs at the statement's variables (producers in the
// group inlined, as any lowering reads them), the key and value head being
// h / (H / H_kv) (grouped queries); the bias is the mask (boolean: 0 or
// -inf; additive: cast to f32; broadcast from its leading dims) plus the
// causal limit; the epilogue stores the output element. What it does not
// take falls back to the composed form: past keys, softcap, windows,
// nonpad_kv_seqlen, a mask shorter than the keys (the present and qk
// outputs are groups of their own, which keep the composed form),
// causal with fewer queries than keys, a consumer fused after the node
// (FusionRejected: the node becomes a root of its own). Producers in the
// group that compute (a projection's bias add, a scale, a GEMM) are rejected
// likewise (computing_producer); movement producers stay, inlined into the
// operands, and their checks that use none of the statement's variables go
// before it.
#include <cmath>

#include "tessel/loop/affine.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/group_lowerer.h"
#include "tessel/support/error.h"

namespace tessel::lowering {

namespace {

const Node* attention_node(const FusionGroup& g) {
  for (const Node* n : g.nodes)
    if (n->domain.empty() && n->op == "Attention") return n;
  return nullptr;
}

// Why the statement cannot take node n (empty: it can).
std::string unsupported_attention(const Node& n) {
  for (size_t i : {4, 5, 6})
    if (n.has_input(i)) return "past keys or nonpad_kv_seqlen";
  if (n.attr_float("softcap", 0.0f) != 0.0f) return "softcap";
  if (n.attr_int("left_window_size", -1) >= 0 || n.attr_int("right_window_size", -1) >= 0) return "windows";
  for (size_t i = 0; i < 3; ++i) {
    const Value* v = n.input(i);
    const DType t = v ? v->type.dtype : DType::F64;
    if (!v || !v->type.has_shape() || (t != DType::F32 && t != DType::F16 && t != DType::BF16))
      return "Q, K, V shapes or types (f32, f16, bf16)";
    for (const Dim& d : *v->type.shape)
      if (!d.is_const()) return "symbolic Q, K, V dims";
  }
  if (n.has_input(3)) {
    const Value* m = n.input(3);
    if (!m->type.has_shape() || m->type.shape->empty()) return "mask shape";
    for (const Dim& d : *m->type.shape)
      if (!d.is_const()) return "symbolic mask dims";
  }
  return "";
}

// `e` with each floordiv / floormod by a positive constant of a
// non-negative expression whose range `ranges` give (loop::const_bounds),
// that fold_affine cannot resolve (a grouped-query head's key/value
// head, floordiv(b * 8 + h, 2), written by the graph's Expand / Reshape)
// replaced by a variable of its own, whose range goes into `ranges` and
// definition into `atoms`: fold_affine then sees a sum of variables where it
// saw a division.
Expr atomize(const Expr& e, const std::string& pre, loop::Bounds* ranges,
             std::vector<std::pair<std::string, Expr>>* atoms) {
  const Expr c = loop::map_args(e, [&](const Expr& a) { return atomize(a, pre, ranges, atoms); });
  if (c->kind != loop::ExprKind::Binary ||
      (c->binary != loop::BinaryOp::FloorDiv && c->binary != loop::BinaryOp::FloorMod))
    return c;
  const Expr &x = c->args[0], &dv = c->args[1];
  if (dv->kind != loop::ExprKind::IntImm || dv->int_value <= 0) return c;
  const Expr folded = loop::fold_affine(c, *ranges);  // resolved over the atoms so far
  if (folded->kind != loop::ExprKind::Binary || folded->binary != c->binary) return folded;
  loop::Interval r{0, 0};
  if (!loop::const_bounds(x, *ranges, &r) || r.lo < 0) return c;
  const int64_t hi =
      c->binary == loop::BinaryOp::FloorDiv ? r.hi / dv->int_value : std::min(dv->int_value - 1, r.hi);
  const std::string name = str_cat(pre, "_q", atoms->size());
  (*ranges)[name] = {0, hi};
  atoms->emplace_back(name, c);
  return loop::var(name, c.dtype());
}

}  // namespace

// The nearest group member upstream of the attention's inputs that
// computes (anything but movement: a projection's bias add, a scale, a
// GEMM), or nullptr. As a kernel of its own (or in its GEMM's epilogue) it
// is computed once instead of per operand element, and the kernel's
// operands stay plain loads it can copy 16 bytes at a time.
const Node* GroupLowerer::computing_producer(const Node& attention) const {
  std::vector<const Node*> todo = {&attention};
  std::set<const Node*> seen;
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    for (const Value* v : n->inputs) {
      const Node* p = v ? v->producer : nullptr;
      if (!p || !members_.count(p) || !seen.insert(p).second) continue;
      const OpSchema* s = reg_.find(p->domain, p->op);
      if (!s || s->fusion != FusionKind::Injective) return p;
      todo.push_back(p);
    }
  }
  return nullptr;
}

std::optional<LoweredGroup> GroupLowerer::try_attention() {
  if (!sched_.gpu_attention) return std::nullopt;
  const Node* a = attention_node(group_);
  if (!a || !unsupported_attention(*a).empty()) return std::nullopt;
  if (a == group_.root && group_.root_output != 0) return std::nullopt;  // present / qk outputs: their own groups
  if (a != group_.root)
    throw FusionRejected(str_cat(a->describe(), ": its consumers do not fit the attention statement's epilogue"), a);
  const Shape& qs = *a->input(0)->type.shape;
  const Shape& ks = *a->input(1)->type.shape;
  const Shape& vs = *a->input(2)->type.shape;
  const bool is3d = qs.size() == 3;
  if (qs.size() != ks.size() || qs.size() != vs.size() || (qs.size() != 3 && qs.size() != 4)) return std::nullopt;
  int64_t batch = qs[0].value(), hq = 0, hkv = 0, sq = 0, skv = 0, d = 0, dv = 0;
  if (is3d) {
    hq = a->attr_int("q_num_heads", 0);
    hkv = a->attr_int("kv_num_heads", 0);
    if (hq <= 0 || hkv <= 0 || qs[2].value() % hq || ks[2].value() % hkv || vs[2].value() % hkv) return std::nullopt;
    sq = qs[1].value(), skv = ks[1].value(), d = qs[2].value() / hq, dv = vs[2].value() / hkv;
  } else {
    hq = qs[1].value(), hkv = ks[1].value(), sq = qs[2].value(), skv = ks[2].value(), d = qs[3].value();
    dv = vs[3].value();
  }
  if (hkv <= 0 || hq % hkv != 0) return std::nullopt;
  const bool causal = a->attr_int("is_causal", 0) != 0;
  if (causal && sq != skv) return std::nullopt;  // the statement's bias takes j > i only
  if (a->has_input(3) && a->input(3)->type.shape->back().value() < skv) return std::nullopt;

  if (const Node* p = computing_producer(*a))
    throw FusionRejected(str_cat(p->describe(), ": computes inside an attention operand"), p);
  const std::string pre = fresh("a");
  const loop::AttentionVars names{pre + "_bh", pre + "_i", pre + "_j", pre + "_d", pre + "_e", pre + "_acc"};
  const Expr bh = loop::var(names.batch), i = loop::var(names.i), j = loop::var(names.j), dd = loop::var(names.d),
             e = loop::var(names.e);
  // Batch, head and key/value head are variables of their own while the
  // operands are built: their ranges let fold_affine turn the index
  // arithmetic of the Reshape / Transpose views around the attention back
  // into plain sums (floordiv((i * 12 + h) * 64 + d, 768) => i for h < 12,
  // d < 64), so the kernel computes no 64-bit division per operand copy.
  // Then they become the digits of the statement's batch variable.
  const Expr b = loop::var(pre + "_b"), h = loop::var(pre + "_h"), hk = loop::var(pre + "_hk");
  const loop::Bounds bounds{{b->name, {0, batch - 1}},  {h->name, {0, hq - 1}},    {hk->name, {0, hkv - 1}},
                            {names.i, {0, sq - 1}},     {names.j, {0, skv - 1}},   {names.d, {0, d - 1}},
                            {names.e, {0, dv - 1}}};
  const loop::VarMap digits{{b->name, loop::floordiv(bh, Expr(hq))},
                            {h->name, loop::floormod(bh, Expr(hq))},
                            {hk->name, loop::floordiv(loop::floormod(bh, Expr(hq)), Expr(hq / hkv))}};
  const auto fold = [&](const Expr& x) {
    // simplify first: a Slice's clamps (min(j, 127) for j < 128) go.
    loop::Bounds ranges = bounds;
    std::vector<std::pair<std::string, Expr>> atoms;
    Expr y = loop::fold_affine(loop::simplify(x, bounds), bounds);
    y = loop::fold_affine(atomize(y, pre, &ranges, &atoms), ranges);
    // Later atoms may be defined in terms of earlier ones.
    for (auto it = atoms.rbegin(); it != atoms.rend(); ++it) y = loop::substitute(y, {{it->first, it->second}});
    return loop::simplify(loop::substitute(y, digits));
  };
  // Element x of head `head`, position s of input `in` (3-D [B, S, H * X] or 4-D [B, H, S, X]).
  const auto at = [&](size_t in, const Expr& head, const Expr& s, const Expr& x, int64_t width) {
    const Idx index = is3d ? Idx{b, s, head * Expr(width) + x} : Idx{b, head, s, x};
    return loop::cast(DType::F32, value_at(a->input(in), index));
  };
  levels_.assign(1, Level{});
  output_levels_ = 1;
  current_ = a;
  const Expr q = at(0, h, i, dd, d), k = at(1, hk, j, dd, d), v = at(2, hk, j, e, dv);
  const Expr neg_inf = loop::float_imm(DType::F32, -INFINITY);
  Expr bias = loop::float_imm(DType::F32, 0.0);
  if (a->has_input(3)) {
    // Broadcast from the right against [B, H, Sq, Skv].
    const Shape& ms = *a->input(3)->type.shape;
    const Idx full{b, h, i, j};
    if (ms.size() > 4) return std::nullopt;
    Idx index;
    for (size_t x = 0; x < ms.size(); ++x) index.push_back(ms[x] == Dim(1) ? Expr(0) : full[4 - ms.size() + x]);
    const Expr m = value_at(a->input(3), index);
    bias = m.dtype() == DType::Bool ? loop::select(m, bias, neg_inf) : loop::cast(DType::F32, m);
  }
  if (causal) bias = loop::select(loop::binary(loop::BinaryOp::Gt, j, i), neg_inf, bias);
  current_ = nullptr;
  // A producer's checks that use none of the statement's variables (a
  // constant Gather index) go before it; a producer that reduces (a
  // projection GEMM inlined as a producer) must be a kernel of its own.
  std::vector<Stmt> before;
  for (const Stmt& x : levels_[0].stmts) {
    bool outside = x->kind == loop::StmtKind::Assert;
    for (const std::string& name : {names.batch, names.i, names.j, names.d, names.e, b->name, h->name, hk->name})
      outside = outside && !loop::mentions_var(x->value, name);
    if (!outside) return std::nullopt;
    before.push_back(x);
  }
  if (!levels_[0].allocs.empty()) return std::nullopt;

  const double scale = a->has_attr("scale") ? a->attr_float("scale", 0) : 1.0 / std::sqrt(static_cast<double>(d));
  const DType in = a->input(0)->type.dtype;
  const DType p_type = in == DType::F16 || in == DType::BF16 ? in : DType::F32;
  const Value* out = a->outputs[0];
  if (!loop::is_computable(out->type.dtype)) return std::nullopt;
  loop::BufferRef out_buf =
      make_buffer(str_cat("out", params_.size()), out->type.dtype, shape_of(out), loop::BufferScope::Param);
  Idx out_index = is3d ? Idx{b, i, h * Expr(dv) + e} : Idx{b, h, i, e};
  for (Expr& x : out_index) x = fold(x);
  const Stmt epilogue =
      loop::store(out_buf, out_index, loop::cast(out->type.dtype, loop::var(names.acc, DType::F32)));
  before.push_back(loop::attention(names, Expr(batch * hq), Expr(sq), Expr(skv), Expr(d), Expr(dv), fold(q), fold(k),
                                   fold(v), loop::float_imm(DType::F32, scale), fold(bias), p_type, epilogue));
  LoweredGroup lg = finish(loop::seq(std::move(before)), out_buf, std::nullopt);
  lg.schedule = "attention";
  return lg;
}

}  // namespace tessel::lowering
