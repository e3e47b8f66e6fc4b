// Random generators: RandomUniform(Like), RandomNormal(Like), Bernoulli,
// Multinomial.
//
// The interpreter must be reproducible, so every node is deterministic. With
// a `seed` attribute the stream is NumPy's legacy RandomState(int(seed)) —
// MT19937 with its 53-bit doubles, the polar Gaussian method and the
// inversion binomial — which is what the ONNX reference implementation draws
// from, so seeded graphs agree with it. Without a seed, the node's seed is
// derived from its first output's name: repeatable run to run, different
// between nodes. (ONNX's node tests for these ops record draws from NumPy's
// global stream, which no implementation is expected to reproduce.)
#include <cmath>
#include <random>

#include "tessel/ops/common.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_random_ops(OpRegistry& r);

namespace {

// NumPy legacy RandomState draws on top of MT19937.
class LegacyRng {
 public:
  explicit LegacyRng(uint32_t seed) : mt_(seed) {}

  double uniform() {
    const uint32_t a = static_cast<uint32_t>(mt_()) >> 5, b = static_cast<uint32_t>(mt_()) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }

  double gauss() {
    if (has_cached_) {
      has_cached_ = false;
      return cached_;
    }
    double x1, x2, r2;
    do {
      x1 = 2.0 * uniform() - 1.0;
      x2 = 2.0 * uniform() - 1.0;
      r2 = x1 * x1 + x2 * x2;
    } while (r2 >= 1.0 || r2 == 0.0);
    const double f = std::sqrt(-2.0 * std::log(r2) / r2);
    cached_ = f * x1;
    has_cached_ = true;
    return f * x2;
  }

  // One Bernoulli(p) draw as NumPy's binomial(1, p) makes it.
  int64_t bernoulli(double p) {
    if (p <= 0.5) return inversion(p);
    return 1 - inversion(1.0 - p);
  }

 private:
  int64_t inversion(double p) {
    const double q = 1.0 - p;
    const double qn = q;  // q^n for n = 1
    const double bound = std::min(1.0, p + 10.0 * std::sqrt(p * q + 1));
    int64_t x = 0;
    double px = qn;
    double u = uniform();
    while (u > px) {
      ++x;
      if (static_cast<double>(x) > bound) {
        x = 0;
        px = qn;
        u = uniform();
      } else {
        u -= px;
        px = ((1 - x + 1) * p * px) / (static_cast<double>(x) * q);
      }
    }
    return x;
  }

  std::mt19937 mt_;
  bool has_cached_ = false;
  double cached_ = 0;
};

LegacyRng make_rng(const Node& n) {
  if (n.has_attr("seed")) {
    const float s = n.attr_float("seed", 0);
    TS_CHECK(std::isfinite(s), n.describe(), ": seed must be finite");
    return LegacyRng(static_cast<uint32_t>(static_cast<int64_t>(s)));
  }
  // FNV-1a of the output name: stable and distinct per node.
  uint32_t h = 2166136261u;
  const std::string key = !n.outputs.empty() && n.outputs[0] ? n.outputs[0]->name : n.name;
  for (unsigned char c : key) h = (h ^ c) * 16777619u;
  return LegacyRng(h);
}

bool is_random_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64; }

// The `dtype` attribute, else `def`.
DType dtype_attr(const Node& n, DType def) {
  if (!n.has_attr("dtype")) return def;
  const int64_t code = n.attr_int("dtype", 0);
  DType dt;
  TS_CHECK(code == static_cast<int>(code) && dtype_from_onnx(static_cast<int>(code), &dt), n.describe(),
           ": unsupported dtype ", code);
  return dt;
}

DType float_out_dtype(const Node& n, DType def) {
  const DType dt = dtype_attr(n, def);
  TS_CHECK(is_random_float(dt), n.describe(), ": output dtype must be a float type, got ", dtype_name(dt));
  return dt;
}

std::vector<int64_t> shape_attr(const Node& n) {
  TS_CHECK(n.has_attr("shape"), n.describe(), ": attribute 'shape' is required");
  std::vector<int64_t> s = n.attr_ints("shape", {});
  checked_numel(s);
  return s;
}

enum class Dist { Uniform, Normal };

// Rounds to the output dtype, so that the affine map below is computed in that
// dtype as the reference does (draw, then scale, then shift).
double round_to(DType t, double v) {
  switch (t) {
    case DType::F32: return static_cast<float>(v);
    case DType::F16: return f16_bits_to_f32(f32_to_f16_bits(static_cast<float>(v)));
    case DType::BF16: return bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(v)));
    default: return v;
  }
}

template <Dist D>
void fill(const Node& n, Tensor* t) {
  LegacyRng rng = make_rng(n);
  const DType dt = t->dtype();
  const double lo = n.attr_float("low", 0.0f), hi = n.attr_float("high", 1.0f);
  const double mul = round_to(dt, D == Dist::Uniform ? hi - lo : n.attr_float("scale", 1.0f));
  const double add = round_to(dt, D == Dist::Uniform ? lo : n.attr_float("mean", 0.0f));
  for (int64_t i = 0; i < t->numel(); ++i) {
    const double draw = round_to(dt, D == Dist::Uniform ? rng.uniform() : rng.gauss());
    t->set_f64(i, round_to(dt, round_to(dt, draw * mul) + add));
  }
}

// ---- RandomUniform / RandomNormal ----------------------------------------------------

void infer_random(InferContext& ctx) {
  ctx.set_output(0, float_out_dtype(ctx.node, DType::F32), shape_of(shape_attr(ctx.node)));
}

template <Dist D>
void kernel_random(KernelContext& ctx) {
  Tensor t(float_out_dtype(ctx.node, DType::F32), shape_attr(ctx.node));
  fill<D>(ctx.node, &t);
  ctx.set_output(0, t);
}

void infer_random_like(InferContext& ctx) {
  const DType in = ctx.input_dtype(0);
  const DType dt = ctx.node.has_attr("dtype") ? float_out_dtype(ctx.node, in) : in;
  if (dt != DType::Undefined) check_dtype(ctx.node, 0, dt, is_random_float, "a float type (or set dtype)");
  if (ctx.has_shape(0)) ctx.set_output(0, dt, ctx.input_shape(0));
  else ctx.set_output_unknown_shape(0, dt);
}

template <Dist D>
void kernel_random_like(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DType dt = float_out_dtype(ctx.node, x.dtype());
  Tensor t(dt, x.shape());
  fill<D>(ctx.node, &t);
  ctx.set_output(0, t);
}

// ---- Bernoulli -------------------------------------------------------------------------

bool is_bernoulli_out(DType t) { return is_random_float(t) || (is_int(t) && int_bits(t) >= 8) || t == DType::Bool; }

void infer_bernoulli(InferContext& ctx) {
  const DType in = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, in, [](DType t) { return is_random_float(t) || t == DType::Undefined; }, "a float type");
  const DType dt = dtype_attr(ctx.node, in);
  if (dt != DType::Undefined) check_dtype(ctx.node, 0, dt, is_bernoulli_out, "a numeric or bool output dtype");
  if (ctx.has_shape(0)) ctx.set_output(0, dt, ctx.input_shape(0));
  else ctx.set_output_unknown_shape(0, dt);
}

void kernel_bernoulli(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& p = ctx.input(0);
  check_dtype(n, 0, p.dtype(), is_random_float, "a float type");
  const DType dt = dtype_attr(n, p.dtype());
  check_dtype(n, 0, dt, is_bernoulli_out, "a numeric or bool output dtype");
  LegacyRng rng = make_rng(n);
  Tensor y(dt, p.shape());
  for (int64_t i = 0; i < p.numel(); ++i) {
    const double pi = p.get_f64(i);
    TS_CHECK(pi >= 0 && pi <= 1, n.describe(), ": probability ", pi, " at ", i, " is outside [0, 1]");
    y.set_i64(i, rng.bernoulli(pi));
  }
  ctx.set_output(0, y);
}

// ---- Multinomial -----------------------------------------------------------------------

DType multinomial_dtype(const Node& n) {
  const DType dt = dtype_attr(n, DType::I32);
  TS_CHECK(dt == DType::I32 || dt == DType::I64, n.describe(), ": dtype must be int32 or int64, got ",
           dtype_name(dt));
  return dt;
}

void infer_multinomial(InferContext& ctx) {
  const Node& n = ctx.node;
  check_dtype(n, 0, ctx.input_dtype(0), [](DType t) { return is_random_float(t) || t == DType::Undefined; },
              "a float type");
  const DType dt = multinomial_dtype(n);
  const int64_t samples = n.attr_int("sample_size", 1);
  TS_CHECK(samples >= 1, n.describe(), ": sample_size must be positive");
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  TS_CHECK(s.size() == 2, n.describe(), ": input must be [batch, classes], got ", shape_str(s));
  ctx.set_output(0, dt, {s[0], samples});
}

void kernel_multinomial(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  check_dtype(n, 0, x.dtype(), is_random_float, "a float type");
  TS_CHECK(x.rank() == 2, n.describe(), ": input must be [batch, classes], got ", dims_str(x.shape()));
  const int64_t samples = n.attr_int("sample_size", 1);
  TS_CHECK(samples >= 1, n.describe(), ": sample_size must be positive");
  const int64_t batch = x.dim(0), classes = x.dim(1);
  TS_CHECK(classes >= 1, n.describe(), ": need at least one class");
  LegacyRng rng = make_rng(n);
  Tensor y(multinomial_dtype(n), {batch, samples});
  std::vector<double> cdf(static_cast<size_t>(classes));
  for (int64_t b = 0; b < batch; ++b) {
    // The input holds unnormalised log-probabilities; subtract the max for range.
    double mx = -INFINITY;
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, x.get_f64(b * classes + c));
    double total = 0;
    for (int64_t c = 0; c < classes; ++c) {
      total += std::isinf(mx) ? 1.0 : std::exp(x.get_f64(b * classes + c) - mx);
      cdf[static_cast<size_t>(c)] = total;
    }
    for (int64_t s = 0; s < samples; ++s) {
      const double u = rng.uniform() * total;
      int64_t pick = 0;
      while (pick + 1 < classes && cdf[static_cast<size_t>(pick)] <= u) ++pick;
      y.set_i64(b * samples + s, pick);
    }
  }
  ctx.set_output(0, y);
}

}  // namespace

void register_random_ops(OpRegistry& r) {
  r.add(OpSchema{"RandomUniform", "", 0, 0, 1, 1, infer_random, kernel_random<Dist::Uniform>, nullptr, 1});
  r.add(OpSchema{"RandomNormal", "", 0, 0, 1, 1, infer_random, kernel_random<Dist::Normal>, nullptr, 1});
  r.add(OpSchema{"RandomUniformLike", "", 1, 1, 1, 1, infer_random_like, kernel_random_like<Dist::Uniform>, nullptr,
                 1});
  r.add(OpSchema{"RandomNormalLike", "", 1, 1, 1, 1, infer_random_like, kernel_random_like<Dist::Normal>, nullptr,
                 1});
  r.add(OpSchema{"Bernoulli", "", 1, 1, 1, 1, infer_bernoulli, kernel_bernoulli, nullptr, 15});
  r.add(OpSchema{"Multinomial", "", 1, 1, 1, 1, infer_multinomial, kernel_multinomial, nullptr, 7});
}

}  // namespace tessel
