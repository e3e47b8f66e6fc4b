// Attention-family operators: Attention (opset 23+: masks, GQA/MQA, causal
// and sliding windows with cache offsets, softcap, past/present KV, the
// qk_matmul_output modes), RotaryEmbedding and LinearAttention.
//
// Everything is computed per query row in double. Where the spec rounds an
// intermediate to the operator's type (the softmax probabilities before the
// product with V, softmax_precision), the kernel rounds at the same point so
// that fp16/bf16 results match the spec's reference.
#include <cmath>
#include <limits>

#include "tessel/ops/conv/conv_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Rounds v to the precision of dt (identity for f64).
double round_to(DType dt, double v) {
  switch (dt) {
    case DType::F32: return static_cast<float>(v);
    case DType::F16: return f16_bits_to_f32(f32_to_f16_bits(static_cast<float>(v)));
    case DType::BF16: return bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(v)));
    default: return v;
  }
}

bool is_attn_float(DType d) { return convutil::is_conv_float(d); }

// ---- Attention: shapes ----------------------------------------------------------------

struct AttnShape {
  bool is3d = false;
  int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, past = 0, d = 0, dv = 0;
  int64_t total() const { return past + skv; }
};

// Head counts and sizes from Q/K/V shapes (concrete).
AttnShape attn_shape(const Node& node, const std::vector<int64_t>& q, const std::vector<int64_t>& k,
                     const std::vector<int64_t>& v) {
  TS_CHECK((q.size() == 3 || q.size() == 4) && k.size() == q.size() && v.size() == q.size(), node.describe(),
           ": Q, K and V must all be 3-D or all be 4-D");
  AttnShape s;
  s.is3d = q.size() == 3;
  s.b = q[0];
  TS_CHECK(k[0] == s.b && v[0] == s.b, node.describe(), ": Q, K and V batch sizes differ");
  if (s.is3d) {
    s.hq = node.attr_int("q_num_heads", 0);
    s.hkv = node.attr_int("kv_num_heads", 0);
    TS_CHECK(s.hq > 0 && s.hkv > 0, node.describe(), ": 3-D inputs need positive q_num_heads and kv_num_heads");
    TS_CHECK(q[2] % s.hq == 0 && k[2] % s.hkv == 0 && v[2] % s.hkv == 0, node.describe(),
             ": hidden sizes are not divisible by the head counts");
    s.sq = q[1];
    s.skv = k[1];
    TS_CHECK(v[1] == s.skv, node.describe(), ": K and V sequence lengths differ");
    s.d = q[2] / s.hq;
    TS_CHECK(k[2] / s.hkv == s.d, node.describe(), ": Q and K head sizes differ");
    s.dv = v[2] / s.hkv;
  } else {
    s.hq = q[1];
    s.hkv = k[1];
    TS_CHECK(v[1] == s.hkv, node.describe(), ": K and V head counts differ");
    s.sq = q[2];
    s.skv = k[2];
    TS_CHECK(v[2] == s.skv, node.describe(), ": K and V sequence lengths differ");
    s.d = q[3];
    TS_CHECK(k[3] == s.d, node.describe(), ": Q and K head sizes differ");
    s.dv = v[3];
  }
  TS_CHECK(s.hkv > 0 && s.hq % s.hkv == 0, node.describe(), ": q heads (", s.hq,
           ") must be a multiple of kv heads (", s.hkv, ")");
  return s;
}

void attention_infer(InferContext& ctx) {
  const Node& node = ctx.node;
  const DType dt = ctx.input_dtype(0);
  check_dtype(node, 0, dt, is_attn_float, "a float type");
  TS_CHECK(ctx.input_dtype(1) == dt, node.describe(), ": K dtype differs from Q");
  const DType vt = ctx.input_dtype(2);
  check_dtype(node, 2, vt, is_attn_float, "a float type");
  if (ctx.has_input(6))
    check_dtype(node, 6, ctx.input_dtype(6), [](DType d) { return d == DType::I64; }, "int64");
  auto unknown = [&] {
    for (size_t i = 0; i < ctx.out_types.size(); ++i) ctx.set_output_unknown_shape(i, i == 2 ? vt : dt);
  };
  if (!ctx.has_shape(0) || !ctx.has_shape(1) || !ctx.has_shape(2)) return unknown();
  const Shape& q = ctx.input_shape(0);
  const Shape& k = ctx.input_shape(1);
  const Shape& v = ctx.input_shape(2);
  TS_CHECK((q.size() == 3 || q.size() == 4) && k.size() == q.size() && v.size() == q.size(), node.describe(),
           ": Q, K and V must all be 3-D or all be 4-D");
  Dim past = 0;
  if (ctx.has_input(4)) {
    if (!ctx.has_shape(4)) return unknown();
    TS_CHECK(ctx.input_shape(4).size() == 4, node.describe(), ": past_key must be 4-D");
    past = ctx.input_shape(4)[2];
  }
  Shape y, pk, pv, qk;
  if (q.size() == 4) {
    const Dim total = past + k[2];
    y = {q[0], q[1], q[2], v[3]};
    pk = {k[0], k[1], total, k[3]};
    pv = {v[0], v[1], total, v[3]};
    qk = {q[0], q[1], q[2], total};
  } else {
    const int64_t hq = node.attr_int("q_num_heads", 0), hkv = node.attr_int("kv_num_heads", 0);
    TS_CHECK(hq > 0 && hkv > 0, node.describe(), ": 3-D inputs need positive q_num_heads and kv_num_heads");
    const Dim total = past + k[1];
    const Dim dv = Dim::floordiv(v[2], hkv), dk = Dim::floordiv(k[2], hkv);
    y = {q[0], q[1], dv * hq};
    pk = {k[0], hkv, total, dk};
    pv = {v[0], hkv, total, dv};
    qk = {q[0], hq, q[1], total};
  }
  ctx.set_output(0, dt, y);
  if (ctx.out_types.size() > 1) ctx.set_output(1, dt, pk);
  if (ctx.out_types.size() > 2) ctx.set_output(2, vt, pv);
  if (ctx.out_types.size() > 3) ctx.set_output(3, dt, qk);
}

// ---- Attention: kernel --------------------------------------------------------------

// Converts a 3-D [B, S, H*D] or 4-D [B, H, S, D] tensor into a 4-D double
// buffer [B, H, S, D].
std::vector<double> to_bhsd(const Tensor& t, bool is3d, int64_t heads) {
  std::vector<double> v = convutil::to_f64(t);
  if (!is3d) return v;
  const int64_t b = t.dim(0), s = t.dim(1), d = t.dim(2) / heads;
  std::vector<double> out(v.size());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t si = 0; si < s; ++si)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t di = 0; di < d; ++di)
          out[static_cast<size_t>(((bi * heads + h) * s + si) * d + di)] =
              v[static_cast<size_t>((bi * s + si) * heads * d + h * d + di)];
  return out;
}

// Concatenates past [B, H, P, D] and new [B, H, S, D] along the sequence.
std::vector<double> concat_seq(const std::vector<double>& past, const std::vector<double>& cur, int64_t b, int64_t h,
                               int64_t p, int64_t s, int64_t d) {
  std::vector<double> out(static_cast<size_t>(b * h * (p + s) * d));
  for (int64_t bh = 0; bh < b * h; ++bh) {
    std::copy(past.begin() + bh * p * d, past.begin() + (bh + 1) * p * d, out.begin() + bh * (p + s) * d);
    std::copy(cur.begin() + bh * s * d, cur.begin() + (bh + 1) * s * d, out.begin() + bh * (p + s) * d + p * d);
  }
  return out;
}

// The attention mask, broadcast against [B, Hq, Sq, T]; its last dim may be
// shorter than T, the rest counting as masked.
struct MaskView {
  bool present = false, boolean = false;
  std::vector<double> vals;
  std::vector<int64_t> strides;  // per target dim (b, h, i), 0 when broadcast
  int64_t last = 0;

  double bias(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (!present) return 0.0;
    if (j >= last) return kNegInf;
    const double v = vals[static_cast<size_t>(b * strides[0] + h * strides[1] + i * strides[2] + j)];
    return boolean ? (v != 0 ? 0.0 : kNegInf) : v;
  }
};

MaskView read_mask(const Node& node, const Tensor& m, const AttnShape& s) {
  MaskView mv;
  mv.present = true;
  mv.boolean = m.dtype() == DType::Bool;
  TS_CHECK(m.rank() >= 1 && m.rank() <= 4, node.describe(), ": attn_mask must have rank 1 to 4, got ", m.rank());
  mv.last = m.shape().back();
  TS_CHECK(mv.last <= s.total(), node.describe(), ": attn_mask's last dim ", mv.last,
           " exceeds the total sequence length ", s.total());
  const std::vector<int64_t> target{s.b, s.hq, s.sq};
  const std::vector<int64_t> st = strides_of(m.shape());
  mv.strides.assign(3, 0);
  const int64_t lead = static_cast<int64_t>(m.rank()) - 1;  // mask dims before the last
  for (int64_t t = 0; t < 3; ++t) {
    const int64_t md = t - (3 - lead);  // right-aligned mask dim for target dim t
    if (md < 0) continue;
    const int64_t size = m.dim(static_cast<int>(md));
    TS_CHECK(size == 1 || size == target[static_cast<size_t>(t)], node.describe(), ": attn_mask shape ",
             dims_str(m.shape()), " does not broadcast to [", s.b, ",", s.hq, ",", s.sq, ",", s.total(), "]");
    if (size != 1) mv.strides[static_cast<size_t>(t)] = st[static_cast<size_t>(md)];
  }
  mv.vals = convutil::to_f64(m);
  return mv;
}

void attention_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& qt = ctx.input(0);
  const Tensor& kt = ctx.input(1);
  const Tensor& vt = ctx.input(2);
  const DType dt = qt.dtype();
  check_dtype(node, 0, dt, is_attn_float, "a float type");
  TS_CHECK(kt.dtype() == dt, node.describe(), ": K dtype differs from Q");
  check_dtype(node, 2, vt.dtype(), is_attn_float, "a float type");
  AttnShape s = attn_shape(node, qt.shape(), kt.shape(), vt.shape());
  const bool has_past = ctx.has_input(4) || ctx.has_input(5);
  TS_CHECK(ctx.has_input(4) == ctx.has_input(5), node.describe(), ": past_key and past_value must be given together");
  const bool has_nonpad = ctx.has_input(6);
  TS_CHECK(!(has_past && has_nonpad), node.describe(), ": nonpad_kv_seqlen cannot be used with past_key/past_value");

  std::vector<double> q = to_bhsd(qt, s.is3d, s.hq);
  std::vector<double> k = to_bhsd(kt, s.is3d, s.hkv);
  std::vector<double> v = to_bhsd(vt, s.is3d, s.hkv);
  if (has_past) {
    const Tensor& pk = ctx.input(4);
    const Tensor& pv = ctx.input(5);
    TS_CHECK(pk.rank() == 4 && pk.dim(0) == s.b && pk.dim(1) == s.hkv && pk.dim(3) == s.d && pk.dtype() == dt,
             node.describe(), ": past_key must have shape [", s.b, ",", s.hkv, ",P,", s.d, "] and Q's dtype");
    TS_CHECK(pv.rank() == 4 && pv.dim(0) == s.b && pv.dim(1) == s.hkv && pv.dim(2) == pk.dim(2) &&
                 pv.dim(3) == s.dv && pv.dtype() == vt.dtype(),
             node.describe(), ": past_value must have shape [", s.b, ",", s.hkv, ",", pk.dim(2), ",", s.dv, "]");
    s.past = pk.dim(2);
    k = concat_seq(convutil::to_f64(pk), k, s.b, s.hkv, s.past, s.skv, s.d);
    v = concat_seq(convutil::to_f64(pv), v, s.b, s.hkv, s.past, s.skv, s.dv);
  }
  const int64_t total = s.total();
  convutil::check_elements(node, checked_mul(checked_mul(s.b, s.hq), checked_mul(s.sq, std::max(total, s.dv))));
  std::vector<int64_t> nonpad;
  if (has_nonpad) {
    const Tensor& np = ctx.input(6);
    TS_CHECK(np.dtype() == DType::I64 && np.rank() == 1 && np.dim(0) == s.b, node.describe(),
             ": nonpad_kv_seqlen must be int64 of shape [", s.b, "]");
    for (int64_t i = 0; i < s.b; ++i) {
      nonpad.push_back(np.get_i64(i));
      TS_CHECK(nonpad.back() >= 0 && nonpad.back() <= total, node.describe(), ": nonpad_kv_seqlen ", nonpad.back(),
               " is outside [0, ", total, "]");
    }
  }
  MaskView mask;
  if (ctx.has_input(3)) mask = read_mask(node, ctx.input(3), s);

  const double scale = node.has_attr("scale") ? node.attr_float("scale", 0) : 1.0 / std::sqrt(static_cast<double>(s.d));
  const double softcap = node.attr_float("softcap", 0.0f);
  const bool causal = node.attr_int("is_causal", 0) != 0;
  const int64_t left = node.attr_int("left_window_size", -1), right = node.attr_int("right_window_size", -1);
  TS_CHECK(left >= -1 && right >= -1, node.describe(), ": window sizes must be -1 or >= 0");
  const int64_t mode = node.attr_int("qk_matmul_output_mode", 0);
  TS_CHECK(mode >= 0 && mode <= 3, node.describe(), ": qk_matmul_output_mode must be 0..3, got ", mode);
  DType sm_type = DType::F64;
  if (node.has_attr("softmax_precision")) {
    const int64_t code = node.attr_int("softmax_precision", 1);
    TS_CHECK(dtype_from_onnx(static_cast<int>(code), &sm_type) && is_attn_float(sm_type), node.describe(),
             ": softmax_precision must be FLOAT, FLOAT16, DOUBLE or BFLOAT16, got ", code);
  }

  const int64_t group = s.hq / s.hkv;
  // fp16/bf16 follow the reference's rounding of every intermediate; wider
  // types compute in double.
  const bool lowp = dt == DType::F16 || dt == DType::BF16;
  const DType sm = node.has_attr("softmax_precision") ? sm_type : dt;
  const bool sm_lowp = sm == DType::F16 || sm == DType::BF16;
  auto r = [&](double x) { return lowp ? round_to(dt, x) : x; };
  auto rs = [&](double x) { return sm_lowp ? round_to(sm, x) : x; };
  const double sqrt_scale = r(std::sqrt(scale));
  std::vector<double> y(static_cast<size_t>(s.b * s.hq * s.sq * s.dv), 0.0);
  std::vector<double> qk_out(static_cast<size_t>(s.b * s.hq * s.sq * total), 0.0);
  std::vector<double> score(static_cast<size_t>(total)), bias(static_cast<size_t>(total)), p(static_cast<size_t>(total));
  for (int64_t b = 0; b < s.b; ++b) {
    // Keys visible before this query block (for causal and window bounds).
    const int64_t offset = has_past ? s.past : has_nonpad ? nonpad[static_cast<size_t>(b)] - s.sq : 0;
    for (int64_t h = 0; h < s.hq; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < s.sq; ++i) {
        const double* qr = q.data() + ((b * s.hq + h) * s.sq + i) * s.d;
        const int64_t pos = i + offset;
        double bias_max = kNegInf;
        for (int64_t j = 0; j < total; ++j) {
          const double* kr = k.data() + ((b * s.hkv + hk) * total + j) * s.d;
          double sc;
          if (lowp) {
            // The spec's reference: (Q*sqrt(scale)) x (K*sqrt(scale))^T with
            // both factors rounded to the input type and a float accumulator.
            float acc = 0;
            for (int64_t e = 0; e < s.d; ++e)
              acc += static_cast<float>(r(qr[e] * sqrt_scale)) * static_cast<float>(r(kr[e] * sqrt_scale));
            sc = r(acc);
            if (softcap > 0) sc = r(r(std::tanh(r(sc / softcap))) * softcap);
          } else {
            double dot = 0;
            for (int64_t e = 0; e < s.d; ++e) dot += qr[e] * kr[e];
            sc = dot * scale;
            if (softcap > 0) sc = softcap * std::tanh(sc / softcap);
          }
          score[static_cast<size_t>(j)] = sc;
          double bj = mask.bias(b, h, i, j);
          if (causal && j > pos) bj = kNegInf;
          if (left >= 0 && pos - j > left) bj = kNegInf;
          if (right >= 0 && j - pos > right) bj = kNegInf;
          if (has_nonpad && j >= nonpad[static_cast<size_t>(b)]) bj = kNegInf;
          bias[static_cast<size_t>(j)] = bj;
          bias_max = std::max(bias_max, bj);
        }
        // Softmax over score + bias (in the softmax type, rounding where the
        // reference does); a row the bias masks entirely is zero.
        double mx = kNegInf;
        for (int64_t j = 0; j < total; ++j) {
          p[static_cast<size_t>(j)] = rs(r(score[static_cast<size_t>(j)] + bias[static_cast<size_t>(j)]));
          mx = std::max(mx, p[static_cast<size_t>(j)]);
        }
        const bool row_masked = bias_max == kNegInf;
        if (mx == kNegInf) mx = 0;
        double sum = 0;
        for (int64_t j = 0; j < total; ++j) {
          p[static_cast<size_t>(j)] = rs(std::exp(rs(p[static_cast<size_t>(j)] - mx)));
          // bfloat16 sums round after every addition; other types accumulate.
          sum = sm == DType::BF16 ? rs(sum + p[static_cast<size_t>(j)]) : sum + p[static_cast<size_t>(j)];
        }
        sum = rs(sum);
        if (sum == 0) sum = 1;
        for (int64_t j = 0; j < total; ++j)
          p[static_cast<size_t>(j)] = row_masked ? 0.0 : round_to(dt, rs(p[static_cast<size_t>(j)] / sum));
        double* qo = qk_out.data() + ((b * s.hq + h) * s.sq + i) * total;
        for (int64_t j = 0; j < total; ++j) {
          switch (mode) {
            case 0:
            case 1: qo[j] = score[static_cast<size_t>(j)]; break;
            case 2: qo[j] = score[static_cast<size_t>(j)] + bias[static_cast<size_t>(j)]; break;
            default: qo[j] = p[static_cast<size_t>(j)]; break;
          }
        }
        double* yr = y.data() + ((b * s.hq + h) * s.sq + i) * s.dv;
        for (int64_t e = 0; e < s.dv; ++e) {
          double acc = 0;
          float accf = 0;
          for (int64_t j = 0; j < total; ++j) {
            const double pv = p[static_cast<size_t>(j)] * v[static_cast<size_t>(((b * s.hkv + hk) * total + j) * s.dv + e)];
            if (lowp) accf += static_cast<float>(pv);
            else acc += pv;
          }
          yr[e] = lowp ? r(accf) : acc;
        }
      }
    }
  }
  if (s.is3d) {
    std::vector<double> y3(y.size());
    for (int64_t b = 0; b < s.b; ++b)
      for (int64_t h = 0; h < s.hq; ++h)
        for (int64_t i = 0; i < s.sq; ++i)
          for (int64_t e = 0; e < s.dv; ++e)
            y3[static_cast<size_t>((b * s.sq + i) * s.hq * s.dv + h * s.dv + e)] =
                y[static_cast<size_t>(((b * s.hq + h) * s.sq + i) * s.dv + e)];
    ctx.set_output(0, convutil::from_f64(dt, {s.b, s.sq, s.hq * s.dv}, y3));
  } else {
    ctx.set_output(0, convutil::from_f64(dt, {s.b, s.hq, s.sq, s.dv}, y));
  }
  if (ctx.output_wanted(1)) ctx.set_output(1, convutil::from_f64(dt, {s.b, s.hkv, total, s.d}, k));
  if (ctx.output_wanted(2)) ctx.set_output(2, convutil::from_f64(vt.dtype(), {s.b, s.hkv, total, s.dv}, v));
  if (ctx.output_wanted(3)) ctx.set_output(3, convutil::from_f64(dt, {s.b, s.hq, s.sq, total}, qk_out));
}

// ---- RotaryEmbedding ----------------------------------------------------------------

bool is_rope_type(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

void rotary_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, is_rope_type, "float, float16 or bfloat16");
  TS_CHECK(ctx.input_dtype(1) == dt && ctx.input_dtype(2) == dt, ctx.node.describe(),
           ": cos_cache and sin_cache must have the input's dtype");
  if (ctx.has_input(3))
    check_dtype(ctx.node, 3, ctx.input_dtype(3), [](DType d) { return d == DType::I64; }, "int64");
  if (!ctx.has_shape(0)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& xs = ctx.input_shape(0);
  TS_CHECK(xs.size() == 3 || xs.size() == 4, ctx.node.describe(), ": input must be 3-D or 4-D, got rank ", xs.size());
  ctx.set_output(0, dt, xs);
}

void rotary_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& cos_t = ctx.input(1);
  const Tensor& sin_t = ctx.input(2);
  check_dtype(node, 0, x.dtype(), is_rope_type, "float, float16 or bfloat16");
  TS_CHECK(cos_t.dtype() == x.dtype() && sin_t.dtype() == x.dtype(), node.describe(),
           ": cos_cache and sin_cache must have the input's dtype");
  TS_CHECK(x.rank() == 3 || x.rank() == 4, node.describe(), ": input must be 3-D or 4-D, got rank ", x.rank());
  const bool is3d = x.rank() == 3;
  const int64_t b = x.dim(0);
  int64_t heads, seq, hd;
  if (is3d) {
    heads = node.attr_int("num_heads", 0);
    TS_CHECK(heads > 0 && x.dim(2) % heads == 0, node.describe(), ": 3-D input needs num_heads dividing ", x.dim(2));
    seq = x.dim(1);
    hd = x.dim(2) / heads;
  } else {
    heads = x.dim(1);
    seq = x.dim(2);
    hd = x.dim(3);
  }
  int64_t rd = node.attr_int("rotary_embedding_dim", 0);
  if (rd == 0) rd = hd;
  TS_CHECK(rd > 0 && rd <= hd && rd % 2 == 0, node.describe(), ": rotary_embedding_dim ", rd,
           " must be even and at most the head size ", hd);
  const int64_t half = rd / 2;
  const bool interleaved = node.attr_int("interleaved", 0) != 0;
  TS_CHECK(cos_t.shape() == sin_t.shape(), node.describe(), ": cos_cache and sin_cache shapes differ");
  std::vector<int64_t> pos;
  if (ctx.has_input(3)) {
    const Tensor& p = ctx.input(3);
    TS_CHECK(p.dtype() == DType::I64 && p.rank() == 2 && p.dim(0) == b && p.dim(1) == seq, node.describe(),
             ": position_ids must be int64 of shape [", b, ",", seq, "]");
    TS_CHECK(cos_t.rank() == 2 && cos_t.dim(1) == half, node.describe(), ": cos_cache must have shape [max_pos, ",
             half, "], got ", dims_str(cos_t.shape()));
    for (int64_t i = 0; i < p.numel(); ++i) {
      pos.push_back(p.get_i64(i));
      TS_CHECK(pos.back() >= 0 && pos.back() < cos_t.dim(0), node.describe(), ": position id ", pos.back(),
               " is outside [0, ", cos_t.dim(0), ")");
    }
  } else {
    TS_CHECK(cos_t.rank() == 3 && cos_t.dim(0) == b && cos_t.dim(1) == seq && cos_t.dim(2) == half, node.describe(),
             ": without position_ids, cos_cache must have shape [", b, ",", seq, ",", half, "], got ",
             dims_str(cos_t.shape()));
  }
  const std::vector<double> xv = convutil::to_f64(x), cv = convutil::to_f64(cos_t), sv = convutil::to_f64(sin_t);
  std::vector<double> y = xv;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t si = 0; si < seq; ++si) {
      // Row of the caches for this token.
      const int64_t row = pos.empty() ? bi * seq + si : pos[static_cast<size_t>(bi * seq + si)];
      const double* c = cv.data() + row * half;
      const double* sn = sv.data() + row * half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = is3d ? (bi * seq + si) * heads * hd + h * hd : ((bi * heads + h) * seq + si) * hd;
        for (int64_t e = 0; e < half; ++e) {
          const int64_t i1 = base + (interleaved ? 2 * e : e);
          const int64_t i2 = base + (interleaved ? 2 * e + 1 : e + half);
          const double x1 = xv[static_cast<size_t>(i1)], x2 = xv[static_cast<size_t>(i2)];
          y[static_cast<size_t>(i1)] = c[e] * x1 - sn[e] * x2;
          y[static_cast<size_t>(i2)] = sn[e] * x1 + c[e] * x2;
        }
      }
    }
  ctx.set_output(0, convutil::from_f64(x.dtype(), x.shape(), y));
}

// ---- LinearAttention ------------------------------------------------------------------

bool is_linattn_type(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

enum class Rule { Linear, Gated, Delta, GatedDelta };

Rule read_rule(const Node& n) {
  const std::string r = n.attr_string("update_rule", "gated_delta");
  if (r == "linear") return Rule::Linear;
  if (r == "gated") return Rule::Gated;
  if (r == "delta") return Rule::Delta;
  if (r == "gated_delta") return Rule::GatedDelta;
  fail(n.describe(), ": unknown update_rule '", r, "'");
}

void linear_attention_infer(InferContext& ctx) {
  const Node& node = ctx.node;
  const DType dt = ctx.input_dtype(0);
  check_dtype(node, 0, dt, is_linattn_type, "float, float16 or bfloat16");
  read_rule(node);
  const int64_t hq = node.attr_int("q_num_heads", 0), hkv = node.attr_int("kv_num_heads", 0);
  TS_CHECK(hq > 0 && hkv > 0 && hq % hkv == 0, node.describe(),
           ": q_num_heads must be a positive multiple of kv_num_heads");
  const DType st = ctx.has_input(3) ? ctx.input_dtype(3) : dt;
  if (!ctx.has_shape(0) || !ctx.has_shape(1) || !ctx.has_shape(2)) {
    ctx.set_output_unknown_shape(0, dt);
    if (ctx.out_types.size() > 1) ctx.set_output_unknown_shape(1, st);
    return;
  }
  const Shape& q = ctx.input_shape(0);
  const Shape& k = ctx.input_shape(1);
  const Shape& v = ctx.input_shape(2);
  TS_CHECK(q.size() == 3 && k.size() == 3 && v.size() == 3, node.describe(), ": query, key and value must be 3-D");
  const Dim dv = Dim::floordiv(v[2], hkv), dk = Dim::floordiv(q[2], hq);
  ctx.set_output(0, dt, {q[0], q[1], dv * hq});
  if (ctx.out_types.size() > 1) ctx.set_output(1, st, {q[0], hkv, dk, dv});
}

void linear_attention_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& qt = ctx.input(0);
  const Tensor& kt = ctx.input(1);
  const Tensor& vt = ctx.input(2);
  const DType dt = qt.dtype();
  check_dtype(node, 0, dt, is_linattn_type, "float, float16 or bfloat16");
  TS_CHECK(kt.dtype() == dt && vt.dtype() == dt, node.describe(), ": key and value must have the query's dtype");
  const Rule rule = read_rule(node);
  const bool gating = rule == Rule::Gated || rule == Rule::GatedDelta;
  const bool delta = rule == Rule::Delta || rule == Rule::GatedDelta;
  const int64_t hq = node.attr_int("q_num_heads", 0), hkv = node.attr_int("kv_num_heads", 0);
  TS_CHECK(hq > 0 && hkv > 0 && hq % hkv == 0, node.describe(),
           ": q_num_heads must be a positive multiple of kv_num_heads");
  TS_CHECK(qt.rank() == 3 && kt.rank() == 3 && vt.rank() == 3, node.describe(), ": query, key and value must be 3-D");
  const int64_t b = qt.dim(0), t = qt.dim(1);
  TS_CHECK(qt.dim(2) % hq == 0 && vt.dim(2) % hkv == 0, node.describe(), ": hidden sizes are not divisible by heads");
  const int64_t dk = qt.dim(2) / hq, dv = vt.dim(2) / hkv;
  TS_CHECK(kt.dim(0) == b && kt.dim(1) == t && kt.dim(2) == hkv * dk, node.describe(), ": key must have shape [", b,
           ",", t, ",", hkv * dk, "]");
  TS_CHECK(vt.dim(0) == b && vt.dim(1) == t, node.describe(), ": value must have shape [", b, ",", t, ",H*dv]");
  TS_CHECK(gating == ctx.has_input(4), node.describe(), ": decay is ", gating ? "required" : "not allowed",
           " for this update_rule");
  TS_CHECK(delta == ctx.has_input(5), node.describe(), ": beta is ", delta ? "required" : "not allowed",
           " for this update_rule");
  std::vector<double> decay, beta;
  bool decay_per_dim = false;
  int64_t beta_heads = 1;
  if (gating) {
    const Tensor& g = ctx.input(4);
    TS_CHECK(g.dtype() == dt && g.rank() == 3 && g.dim(0) == b && g.dim(1) == t &&
                 (g.dim(2) == hkv || g.dim(2) == hkv * dk),
             node.describe(), ": decay must have shape [", b, ",", t, ",", hkv, "] or [", b, ",", t, ",", hkv * dk, "]");
    decay_per_dim = g.dim(2) == hkv * dk && dk != 1;
    decay = convutil::to_f64(g);
  }
  if (delta) {
    const Tensor& be = ctx.input(5);
    TS_CHECK(be.dtype() == dt && be.rank() == 3 && be.dim(0) == b && be.dim(1) == t &&
                 (be.dim(2) == hkv || be.dim(2) == 1),
             node.describe(), ": beta must have shape [", b, ",", t, ",", hkv, "] or [", b, ",", t, ",1]");
    beta_heads = be.dim(2);
    beta = convutil::to_f64(be);
  }
  DType st = dt;
  std::vector<double> state(static_cast<size_t>(b * hkv * dk * dv), 0.0);
  if (ctx.has_input(3)) {
    const Tensor& ps = ctx.input(3);
    check_dtype(node, 3, ps.dtype(), is_linattn_type, "float, float16 or bfloat16");
    TS_CHECK(ps.shape() == std::vector<int64_t>({b, hkv, dk, dv}), node.describe(), ": past_state must have shape ",
             dims_str({b, hkv, dk, dv}), ", got ", dims_str(ps.shape()));
    st = ps.dtype();
    state = convutil::to_f64(ps);
  }
  double scale = node.attr_float("scale", 0.0f);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(dk));
  const std::vector<double> q = convutil::to_f64(qt), k = convutil::to_f64(kt), v = convutil::to_f64(vt);
  std::vector<double> out(static_cast<size_t>(b * t * hq * dv), 0.0), vt_row(static_cast<size_t>(dv));
  const int64_t group = hq / hkv;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t ti = 0; ti < t; ++ti) {
      const int64_t row = bi * t + ti;
      for (int64_t h = 0; h < hkv; ++h) {
        double* S = state.data() + (bi * hkv + h) * dk * dv;  // [dk, dv]
        const double* kr = k.data() + row * hkv * dk + h * dk;
        const double* vr = v.data() + row * hkv * dv + h * dv;
        if (gating)
          for (int64_t i = 0; i < dk; ++i) {
            const double g = decay_per_dim ? decay[static_cast<size_t>(row * hkv * dk + h * dk + i)]
                                           : decay[static_cast<size_t>(row * hkv + h)];
            const double f = std::exp(g);
            for (int64_t j = 0; j < dv; ++j) S[i * dv + j] *= f;
          }
        for (int64_t j = 0; j < dv; ++j) vt_row[static_cast<size_t>(j)] = vr[j];
        if (delta) {
          // v_t <- beta * (v_t - S^T k_t), with S already decayed.
          const double be = beta[static_cast<size_t>(row * beta_heads + (beta_heads == 1 ? 0 : h))];
          for (int64_t j = 0; j < dv; ++j) {
            double r = 0;
            for (int64_t i = 0; i < dk; ++i) r += S[i * dv + j] * kr[i];
            vt_row[static_cast<size_t>(j)] = be * (vr[j] - r);
          }
        }
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += kr[i] * vt_row[static_cast<size_t>(j)];
        for (int64_t g = 0; g < group; ++g) {
          const int64_t qh = h * group + g;
          const double* qr = q.data() + row * hq * dk + qh * dk;
          double* o = out.data() + row * hq * dv + qh * dv;
          for (int64_t j = 0; j < dv; ++j) {
            double acc = 0;
            for (int64_t i = 0; i < dk; ++i) acc += qr[i] * S[i * dv + j];
            o[j] = scale * acc;
          }
        }
      }
    }
  ctx.set_output(0, convutil::from_f64(dt, {b, t, hq * dv}, out));
  if (ctx.output_wanted(1)) ctx.set_output(1, convutil::from_f64(st, {b, hkv, dk, dv}, state));
}

}  // namespace

void register_attention_ops(OpRegistry& r) {
  r.add({"Attention", "", 3, 7, 1, 4, attention_infer, attention_kernel, nullptr, 23});
  r.add({"RotaryEmbedding", "", 3, 4, 1, 1, rotary_infer, rotary_kernel, nullptr, 23});
  r.add({"LinearAttention", "", 3, 6, 1, 2, linear_attention_infer, linear_attention_kernel, nullptr, 27});
}

}  // namespace tessel
