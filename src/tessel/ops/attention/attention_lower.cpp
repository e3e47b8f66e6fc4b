// Compiled forms of Attention (every output) and RotaryEmbedding.
//
// Attention is one node, lowered as composed reductions per output element
// y[b, h, i, e]: the row maximum and the row sum of the softmax over the key
// positions j (hoisted to the query row), and the probability-weighted sum of
// V; each score is itself a dot product over the head dim, recomputed where
// it is used. Computed in f32 (f64 for f64), rounded once to the output type.
// Keys are past_key followed by K; the bias is the mask (boolean or additive,
// broadcast, its last dim possibly shorter than the keys), causal and window
// limits, and nonpad_kv_seqlen. A row that the bias masks entirely is zero.
#include <cmath>

#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;


struct AttnGeom {
  bool is3d = false;
  int64_t hq = 0, hkv = 0, sq = 0, skv = 0, past = 0, d = 0, dv = 0;
  int64_t total() const { return past + skv; }
};

AttnGeom attn_geom(LowerContext& ctx) {
  AttnGeom g;
  const std::vector<int64_t> q = const_in_dims(ctx, 0), k = const_in_dims(ctx, 1), v = const_in_dims(ctx, 2);
  g.is3d = q.size() == 3;
  if (g.is3d) {
    g.hq = ctx.node.attr_int("q_num_heads", 0);
    g.hkv = ctx.node.attr_int("kv_num_heads", 0);
    if (g.hq <= 0 || g.hkv <= 0) ctx.unsupported("head counts");
    g.sq = q[1];
    g.skv = k[1];
    g.d = q[2] / g.hq;
    g.dv = v[2] / g.hkv;
  } else {
    g.hq = q[1];
    g.hkv = k[1];
    g.sq = q[2];
    g.skv = k[2];
    g.d = q[3];
    g.dv = v[3];
  }
  if (g.hkv <= 0 || g.hq % g.hkv != 0) ctx.unsupported("q heads not a multiple of kv heads");
  if (ctx.has_input(4)) g.past = const_in_dims(ctx, 4)[2];
  return g;
}

// Element e of head h, position s of a Q/K/V operand (3-D [B, S, H*D] or
// 4-D [B, H, S, D]).
Expr operand_at(LowerContext& ctx, const AttnGeom& g, size_t i, const Expr& b, const Expr& h, const Expr& s,
                const Expr& e, int64_t head_size) {
  if (g.is3d) return input_as_compute(ctx, i, {b, s, h * Expr(head_size) + e});
  return input_as_compute(ctx, i, {b, h, s, e});
}

// Key/value position j of the concatenation past ++ current.
Expr kv_at(LowerContext& ctx, const AttnGeom& g, size_t cur, size_t past, const Expr& b, const Expr& hk, const Expr& j,
           const Expr& e, int64_t head_size) {
  const Expr now = operand_at(ctx, g, cur, b, hk, clamp_index(j - Expr(g.past), Expr(0), Expr(g.skv - 1)), e, head_size);
  if (g.past == 0) return now;
  const Expr before = input_as_compute(ctx, past, {b, hk, clamp_index(j, Expr(0), Expr(g.past - 1)), e});
  return loop::select(lt(j, Expr(g.past)), before, now);
}

struct Row {
  Expr b, h, hk, i;
};

class AttentionLowering {
 public:
  AttentionLowering(LowerContext& ctx) : ctx_(ctx), g_(attn_geom(ctx)), t_(compute_type(ctx.in_dtype(0))) {
    const Node& n = ctx.node;
    scale_ = n.has_attr("scale") ? n.attr_float("scale", 0) : 1.0 / std::sqrt(static_cast<double>(g_.d));
    softcap_ = n.attr_float("softcap", 0.0f);
    causal_ = n.attr_int("is_causal", 0) != 0;
    left_ = n.attr_int("left_window_size", -1);
    right_ = n.attr_int("right_window_size", -1);
    dt_ = ctx.in_dtype(0);
    sm_ = dt_;
    if (n.has_attr("softmax_precision") &&
        !dtype_from_onnx(static_cast<int>(n.attr_int("softmax_precision", 1)), &sm_))
      ctx.unsupported("softmax_precision");
  }

  // Y[b, h, i, e] (4-D) or Y[b, i, h * dv + e] (3-D): the probabilities times V.
  Expr y(const Idx& index) {
    Expr e;
    if (g_.is3d) {
      set_row(index[0], loop::floordiv(index[2], Expr(g_.dv)), index[1]);
      e = loop::floormod(index[2], Expr(g_.dv));
    } else {
      set_row(index[0], index[1], index[2]);
      e = index[3];
    }
    Expr y = ctx_.reduce(ReduceOp::Sum, constant(t_, 0), {Expr(g_.total())}, [&](const Idx& k) {
      return prob(k[0]) * kv_at(ctx_, g_, 2, 5, r_.b, r_.hk, k[0], e, g_.dv);
    });
    return loop::cast(ctx_.out_dtype(0), unless_row_masked(r(y)));
  }

  // present_key (output 1) / present_value (output 2) [b, hk, j, e]: the
  // past entries followed by the current K / V, always 4-D.
  Expr present(size_t output, const Idx& index) {
    const bool key = output == 1;
    const Expr v = kv_at(ctx_, g_, key ? 1 : 2, key ? 4 : 5, index[0], index[1], index[2], index[3], key ? g_.d : g_.dv);
    return loop::cast(ctx_.out_dtype(output), v);
  }

  // qk_matmul_output [b, h, i, j], chosen by qk_matmul_output_mode as the
  // reference kernel does: the (softcapped) scores for 0 and 1, the scores
  // plus the bias for 2, the probabilities for 3.
  Expr qk(const Idx& index) {
    set_row(index[0], index[1], index[2]);
    const Expr j = index[3];
    const int64_t mode = ctx_.node.attr_int("qk_matmul_output_mode", 0);
    Expr v;
    switch (mode) {
      case 0:
      case 1: v = score(r_, j); break;
      case 2: v = score(r_, j) + bias(r_, j); break;
      case 3: v = unless_row_masked(prob(j)); break;
      default: ctx_.unsupported(str_cat("qk_matmul_output_mode ", mode));
    }
    return loop::cast(ctx_.out_dtype(3), v);
  }

 private:
  // The query row the next definitions read; the softmax statistics are
  // reductions over the keys at this row (hoisted to it by the engine).
  void set_row(const Expr& b, const Expr& h, const Expr& i) {
    r_ = {b, h, loop::floordiv(h, Expr(g_.hq / g_.hkv)), i};
    const Expr T = Expr(g_.total());
    max_ = ctx_.reduce(ReduceOp::Max, lowest(t_), {T}, [&](const Idx& k) { return logit(k[0]); });
    max_ = loop::select(eq(max_, lowest(t_)), constant(t_, 0), max_);
    if (sm_ == DType::BF16)  // the reference rounds the bf16 sum after every addition
      sum_ = loop::cast(t_, ctx_.reduce(ReduceOp::Sum, constant(DType::BF16, 0), {T},
                                        [&](const Idx& k) { return loop::cast(DType::BF16, expo(k[0])); }));
    else
      sum_ = rs(ctx_.reduce(ReduceOp::Sum, constant(t_, 0), {T}, [&](const Idx& k) { return expo(k[0]); }));
    sum_ = loop::select(eq(sum_, constant(t_, 0)), constant(t_, 1), sum_);
  }

  // fp16/bf16 round where the spec's reference does: the logits, each
  // softmax step in the softmax type, the probabilities to the input type.
  Expr logit(const Expr& j) { return rs(r(score(r_, j) + bias(r_, j))); }
  Expr expo(const Expr& j) { return rs(intrinsic("exp", rs(logit(j) - max_))); }
  Expr prob(const Expr& j) { return round_to(dt_, rs(div(expo(j), sum_))); }

  // x, or 0 where the bias masks the whole row (the reference's rule).
  Expr unless_row_masked(const Expr& x) {
    if (!has_bias()) return x;
    const Expr bias_max =
        ctx_.reduce(ReduceOp::Max, lowest(t_), {Expr(g_.total())}, [&](const Idx& k) { return bias(r_, k[0]); });
    return loop::select(eq(bias_max, lowest(t_)), constant(t_, 0), x);
  }

  bool lowp(DType t) const { return t == DType::F16 || t == DType::BF16; }
  // x rounded to type t and back (identity unless t is f16/bf16).
  Expr round_to(DType t, const Expr& x) const { return lowp(t) ? loop::cast(t_, loop::cast(t, x)) : x; }
  Expr r(const Expr& x) const { return round_to(dt_, x); }
  Expr rs(const Expr& x) const { return round_to(sm_, x); }

  bool has_bias() const { return ctx_.has_input(3) || ctx_.has_input(6) || causal_ || left_ >= 0 || right_ >= 0; }

  // scale * q.k (softcapped). fp16/bf16 follow the reference: both factors
  // scaled by sqrt(scale) and rounded, an f32 dot product, rounded.
  Expr score(const Row& row, const Expr& j) {
    const bool low = lowp(dt_);
    const Expr half_scale = r_round(std::sqrt(scale_));
    Expr dot = ctx_.reduce(ReduceOp::Sum, constant(t_, 0), {Expr(g_.d)}, [&](const Idx& k) {
      const Expr q = operand_at(ctx_, g_, 0, row.b, row.h, row.i, k[0], g_.d);
      const Expr kk = kv_at(ctx_, g_, 1, 4, row.b, row.hk, j, k[0], g_.d);
      return low ? r(q * half_scale) * r(kk * half_scale) : q * kk;
    });
    if (low) {
      Expr s = r(dot);
      if (softcap_ > 0) {
        const Expr c = constant(t_, softcap_);
        s = r(r(intrinsic("tanh", r(div(s, c)))) * c);
      }
      return s;
    }
    Expr s = dot * constant(t_, scale_);
    if (softcap_ > 0) s = constant(t_, softcap_) * loop::call("tanh", t_, {div(s, constant(t_, softcap_))});
    return s;
  }

  // A constant rounded to the input type.
  Expr r_round(double v) const { return r(constant(t_, v)); }

  // Additive mask value at key j (0 or -inf for boolean masks).
  Expr mask(const Row& row, const Expr& j) {
    const Shape& ms = *ctx_.node.input(3)->type.shape;
    const int64_t last = const_in_dims(ctx_, 3).back();
    const Idx target{row.b, row.h, row.i};
    Idx at;
    for (size_t d = 0; d + 1 < ms.size(); ++d) {
      const size_t td = 3 - (ms.size() - 1) + d;
      at.push_back(ms[d] == Dim(1) ? Expr(0) : target[td]);
    }
    at.push_back(clamp_index(j, Expr(0), Expr(last - 1)));
    const Expr neg_inf = lowest(t_);
    Expr v = ctx_.input(3, at);
    v = v.dtype() == DType::Bool ? loop::select(v, constant(t_, 0), neg_inf) : loop::cast(t_, v);
    return last < g_.total() ? loop::select(lt(j, Expr(last)), v, neg_inf) : v;
  }

  Expr bias(const Row& row, const Expr& j) {
    Expr b = ctx_.has_input(3) ? mask(row, j) : constant(t_, 0);
    Expr masked = loop::bool_imm(false);
    const auto mask_if = [&](const Expr& c) { masked = or_(masked, c); };
    Expr offset = Expr(g_.past);
    if (ctx_.has_input(6)) {
      const Expr nonpad = loop::cast(DType::I64, ctx_.input(6, {row.b}));
      offset = nonpad - Expr(g_.sq);
      mask_if(ge(j, nonpad));
    }
    const Expr pos = row.i + offset;
    if (causal_) mask_if(gt(j, pos));
    if (left_ >= 0) mask_if(gt(pos - j, Expr(left_)));
    if (right_ >= 0) mask_if(gt(j - pos, Expr(right_)));
    return loop::select(masked, lowest(t_), b);
  }

  LowerContext& ctx_;
  AttnGeom g_;
  DType t_;                          // compute type
  DType dt_ = DType::F32, sm_ = DType::F32;  // input and softmax types
  Row r_;
  Expr max_, sum_;  // softmax statistics of the row r_
  double scale_ = 1, softcap_ = 0;
  bool causal_ = false;
  int64_t left_ = -1, right_ = -1;
};

// Each used output is a kernel of its own (OpSchema::multi_output_lowering):
// Y, present_key, present_value, qk_matmul_output.
Expr lower_attention(LowerContext& ctx, size_t output, const Idx& index) {
  if (!is_float(compute_type(ctx.in_dtype(0)))) ctx.unsupported("non-float input");
  AttentionLowering a(ctx);
  switch (output) {
    case 0: return a.y(index);
    case 1:
    case 2: return a.present(output, index);
    case 3: return a.qk(index);
    default: ctx.unsupported(str_cat("output ", output));
  }
}

// ---- RotaryEmbedding ------------------------------------------------------------

// y[e] for e < rotary_dim pairs x[e] with its partner (e +- half, or the
// neighbour when interleaved): y1 = c x1 - s x2, y2 = s x1 + c x2. Dims beyond
// rotary_dim pass through.
Expr lower_rotary(LowerContext& ctx, size_t, const Idx& index) {
  const std::vector<int64_t> xs = const_in_dims(ctx, 0);
  const bool is3d = xs.size() == 3;
  const int64_t heads = is3d ? ctx.node.attr_int("num_heads", 0) : xs[1];
  if (heads <= 0) ctx.unsupported("num_heads");
  const int64_t hd = is3d ? xs[2] / heads : xs[3];
  int64_t rd = ctx.node.attr_int("rotary_embedding_dim", 0);
  if (rd == 0) rd = hd;
  const int64_t half = rd / 2;
  const bool interleaved = ctx.node.attr_int("interleaved", 0) != 0;
  const Expr b = index[0], s = is3d ? index[1] : index[2];
  const Expr last = index.back();
  const Expr e = is3d ? loop::floormod(last, Expr(hd)) : last;
  const Expr base = last - e;  // start of the head along the last dim
  // Pair slot, whether this is the second element of the pair, the partner.
  Expr slot, second, partner;
  if (interleaved) {
    slot = loop::floordiv(e, Expr(2));
    second = eq(loop::floormod(e, Expr(2)), Expr(1));
    partner = loop::select(second, e - Expr(1), e + Expr(1));
  } else {
    second = ge(e, Expr(half));
    slot = loop::select(second, e - Expr(half), e);
    partner = loop::select(second, e - Expr(half), e + Expr(half));
  }
  slot = clamp_index(slot, Expr(0), Expr(half - 1));
  partner = clamp_index(partner, Expr(0), Expr(hd - 1));
  Idx cache_at;
  if (ctx.has_input(3)) {
    const Expr p = loop::cast(DType::I64, ctx.input(3, {b, s}));
    const Expr rows = ctx.in_shape(1)[0];
    ctx.check(in_range(p, Expr(0), rows), str_cat(ctx.node.describe(), ": position id out of range"));
    cache_at = {clamp_index(p, Expr(0), rows - Expr(1)), slot};
  } else {
    cache_at = {b, s, slot};
  }
  const Expr c = input_as_compute(ctx, 1, cache_at), sn = input_as_compute(ctx, 2, cache_at);
  Idx pidx = index;
  pidx.back() = base + partner;
  const Expr x = input_as_compute(ctx, 0, index), xp = input_as_compute(ctx, 0, pidx);
  const Expr rotated = loop::select(second, sn * xp + c * x, c * x - sn * xp);
  const Expr y = loop::select(lt(e, Expr(rd)), rotated, x);
  return loop::cast(ctx.out_dtype(), y);
}

}  // namespace

void register_attention_lowerings(OpRegistry& r) {
  r.set_lowering("", "Attention", FusionKind::Reduction, lower_attention);
  r.set_multi_output_lowering("", "Attention");
  r.set_lowering("", "RotaryEmbedding", FusionKind::Injective, lower_rotary);
}

}  // namespace tessel
