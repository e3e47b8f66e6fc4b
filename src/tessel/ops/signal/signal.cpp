// Signal processing: DFT, STFT, the Blackman/Hamming/Hann windows and
// MelWeightMatrix.
//
// Transforms are direct O(N^2) sums in double with exactly reduced twiddle
// angles (2*pi*((k*n) mod N)/N), which keeps them accurate for the frame
// sizes these operators see; complex values are stored as a trailing dim of 2
// (real, imaginary), real signals as a trailing dim of 1.
#include <cmath>
#include <complex>
#include <numbers>

#include "tessel/ops/common.h"
#include "tessel/ops/control/control_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_signal_ops(OpRegistry& r);

namespace {

using cd = std::complex<double>;

bool is_signal_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64; }
bool is_i32_i64(DType t) { return t == DType::I32 || t == DType::I64; }

// exp(-+2*pi*i*m/len) for m in [0, len): every twiddle factor a transform of
// this length needs, each computed once from an exactly reduced angle.
std::vector<cd> twiddles(int64_t len, bool inverse) {
  std::vector<cd> t(static_cast<size_t>(len));
  for (int64_t m = 0; m < len; ++m) {
    const double a = 2 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(len);
    t[static_cast<size_t>(m)] = {std::cos(a), inverse ? std::sin(a) : -std::sin(a)};
  }
  return t;
}

// out[k] = sum_n in[n] * tw[(k*n) mod len] for k < out.size(); `in` is
// already zero-padded/truncated to len. The inverse is scaled by 1/len.
void dft_line(const std::vector<cd>& in, const std::vector<cd>& tw, bool inverse, std::vector<cd>* out) {
  const int64_t len = static_cast<int64_t>(tw.size());
  for (size_t k = 0; k < out->size(); ++k) {
    const int64_t step = static_cast<int64_t>(k) % len;
    cd acc = 0;
    int64_t m = 0;  // (k*n) mod len, advanced without multiplying
    for (int64_t n = 0; n < len; ++n) {
      acc += in[static_cast<size_t>(n)] * tw[static_cast<size_t>(m)];
      m += step;
      if (m >= len) m -= len;
    }
    (*out)[k] = inverse ? acc / static_cast<double>(len) : acc;
  }
}

// Real signal of length len from its one-sided spectrum (numpy irfft): bins
// beyond the input are zero, the imaginary parts of bin 0 and (for even len)
// bin len/2 do not contribute.
void irfft_line(const std::vector<cd>& half, const std::vector<cd>& tw, std::vector<double>* out) {
  const int64_t len = static_cast<int64_t>(tw.size());
  const int64_t bins = len / 2 + 1;
  auto bin = [&](int64_t k) { return k < static_cast<int64_t>(half.size()) ? half[static_cast<size_t>(k)] : cd(0); };
  for (int64_t t = 0; t < len; ++t) {
    double acc = bin(0).real();
    for (int64_t k = 1; k < bins; ++k) {
      const bool nyquist = len % 2 == 0 && k == len / 2;
      const double term = (bin(k) * tw[static_cast<size_t>((k * t) % len)]).real();
      acc += nyquist ? term : 2 * term;
    }
    (*out)[static_cast<size_t>(t)] = acc / static_cast<double>(len);
  }
}

int64_t read_scalar_int(const Tensor& t, const Node& n, const char* what) {
  TS_CHECK(is_i32_i64(t.dtype()), n.describe(), ": ", what, " must be int32 or int64, got ", dtype_name(t.dtype()));
  TS_CHECK(t.numel() == 1 && t.rank() <= 1, n.describe(), ": ", what, " must be a scalar, got shape ",
           dims_str(t.shape()));
  return t.get_i64(0);
}

// ---- DFT -----------------------------------------------------------------------------

constexpr int64_t kMaxDftLength = int64_t{1} << 20;

struct DftParams {
  int64_t axis = 0, length = 0;
  bool inverse = false, onesided = false;
};

int64_t dft_axis(int64_t a, int64_t rank, const Node& n) {
  TS_CHECK((a >= -rank && a <= -2) || (a >= 0 && a <= rank - 2), n.describe(), ": axis ", a,
           " is out of range for rank ", rank, " (the last dim holds real/imaginary parts)");
  return a < 0 ? a + rank : a;
}

void infer_dft(InferContext& ctx) {
  const Node& n = ctx.node;
  const DType dt = ctx.input_dtype(0);
  check_dtype(n, 0, dt, is_signal_float, "a float type");
  if (ctx.has_input(1)) check_dtype(n, 1, ctx.input_dtype(1), is_i32_i64, "int32 or int64");
  if (ctx.has_input(2)) check_dtype(n, 2, ctx.input_dtype(2), [](DType t) { return t == DType::I64; }, "int64");
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  Shape s = ctx.input_shape(0);
  const int64_t rank = static_cast<int64_t>(s.size());
  TS_CHECK(rank >= 2, n.describe(), ": input must have rank >= 2, got ", shape_str(s));
  TS_CHECK(!s.back().is_const() || s.back().value() == 1 || s.back().value() == 2, n.describe(),
           ": the last dim must be 1 (real) or 2 (complex), got ", s.back().str());
  std::optional<int64_t> axis = ctx.has_input(2) ? std::nullopt : std::optional<int64_t>(-2);
  if (auto v = ctx.input_dims_value(2); v && v->size() == 1 && (*v)[0].is_const()) axis = (*v)[0].value();
  if (!axis) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const int64_t a = dft_axis(*axis, rank, n);
  const bool inverse = n.attr_int("inverse", 0) != 0, onesided = n.attr_int("onesided", 0) != 0;
  Dim len = s[static_cast<size_t>(a)];
  if (ctx.has_input(1)) {
    auto v = ctx.input_dims_value(1);
    if (!v || v->size() != 1) {
      ctx.set_output_unknown_shape(0, dt);
      return;
    }
    len = (*v)[0];
  } else if (inverse && onesided) {
    len = (len - 1) * 2;
  }
  s[static_cast<size_t>(a)] = !inverse && onesided ? Dim::floordiv(len, 2) + 1 : len;
  s.back() = inverse && onesided ? 1 : 2;
  ctx.set_output(0, dt, s);
}

void kernel_dft(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  check_dtype(n, 0, x.dtype(), is_signal_float, "a float type");
  const int64_t rank = static_cast<int64_t>(x.rank());
  TS_CHECK(rank >= 2, n.describe(), ": input must have rank >= 2, got ", dims_str(x.shape()));
  const int64_t comps = x.shape().back();
  TS_CHECK(comps == 1 || comps == 2, n.describe(), ": the last dim must be 1 (real) or 2 (complex), got ", comps);
  DftParams p;
  p.inverse = n.attr_int("inverse", 0) != 0;
  p.onesided = n.attr_int("onesided", 0) != 0;
  p.axis = dft_axis(ctx.has_input(2) ? read_scalar_int(ctx.input(2), n, "axis") : -2, rank, n);
  const int64_t in_len = x.dim(static_cast<int>(p.axis));
  if (ctx.has_input(1)) p.length = read_scalar_int(ctx.input(1), n, "dft_length");
  else p.length = p.inverse && p.onesided ? 2 * (in_len - 1) : in_len;
  TS_CHECK(p.length >= 1, n.describe(), ": dft_length must be positive, got ", p.length);
  // The direct transform is quadratic; beyond this it would not finish.
  TS_CHECK(p.length <= kMaxDftLength, n.describe(), ": dft_length ", p.length, " exceeds the reference limit of ",
           kMaxDftLength);

  const bool irfft = p.inverse && p.onesided;
  const int64_t out_len = !p.inverse && p.onesided ? p.length / 2 + 1 : p.length;
  std::vector<int64_t> oshape = x.shape();
  oshape[static_cast<size_t>(p.axis)] = out_len;
  oshape.back() = irfft ? 1 : 2;
  Tensor y(x.dtype(), oshape);

  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < p.axis; ++d) outer *= x.dim(static_cast<int>(d));
  for (int64_t d = p.axis + 1; d < rank - 1; ++d) inner *= x.dim(static_cast<int>(d));
  const int64_t oc = oshape.back();
  // An irfft reads up to length/2+1 bins; the others read up to `length` points.
  const int64_t take = std::min(in_len, irfft ? p.length / 2 + 1 : p.length);
  std::vector<cd> line(static_cast<size_t>(irfft ? take : p.length));
  std::vector<cd> spec(static_cast<size_t>(out_len));
  std::vector<double> real(static_cast<size_t>(irfft ? p.length : 0));
  const std::vector<cd> tw = twiddles(p.length, p.inverse);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::fill(line.begin(), line.end(), cd(0));
      for (int64_t t = 0; t < take; ++t) {
        const int64_t base = ((o * in_len + t) * inner + i) * comps;
        line[static_cast<size_t>(t)] = cd(x.get_f64(base), comps == 2 ? x.get_f64(base + 1) : 0.0);
      }
      if (irfft) irfft_line(line, tw, &real);
      else dft_line(line, tw, p.inverse, &spec);
      for (int64_t k = 0; k < out_len; ++k) {
        const int64_t base = ((o * out_len + k) * inner + i) * oc;
        if (irfft) {
          y.set_f64(base, real[static_cast<size_t>(k)]);
        } else {
          y.set_f64(base, spec[static_cast<size_t>(k)].real());
          y.set_f64(base + 1, spec[static_cast<size_t>(k)].imag());
        }
      }
    }
  }
  ctx.set_output(0, y);
}

// DFT-17 took the axis as an attribute (default 1); DFT-20 takes it as an
// optional third input (default -2).
void upgrade_dft(Node& node, int64_t opset) {
  if (opset >= 20) return;
  const int64_t axis = node.attr_int("axis", 1);
  node.attrs.erase("axis");
  Value* v = node.owner->add_initializer(node.owner->fresh_name("dft_axis"), Tensor::scalar_i64(axis));
  if (node.inputs.size() < 2) node.inputs.resize(2, nullptr);
  node.inputs.resize(3, nullptr);
  node.inputs[2] = v;
}

// ---- STFT ----------------------------------------------------------------------------

void infer_stft(InferContext& ctx) {
  const Node& n = ctx.node;
  const DType dt = ctx.input_dtype(0);
  check_dtype(n, 0, dt, is_signal_float, "a float type");
  check_dtype(n, 1, ctx.input_dtype(1), is_i32_i64, "int32 or int64");
  if (ctx.has_input(2)) check_dtype(n, 2, ctx.input_dtype(2), [&](DType t) { return t == dt; }, "the signal's dtype");
  if (ctx.has_input(3)) check_dtype(n, 3, ctx.input_dtype(3), is_i32_i64, "int32 or int64");
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  TS_CHECK(s.size() == 3, n.describe(), ": signal must be [batch, length, 1 or 2], got ", shape_str(s));
  std::optional<Dim> frame;
  if (ctx.has_input(3)) {
    if (auto v = ctx.input_dims_value(3); v && v->size() == 1) frame = (*v)[0];
  } else if (ctx.has_input(2)) {
    if (ctx.has_shape(2) && ctx.input_shape(2).size() == 1) frame = ctx.input_shape(2)[0];
  } else {
    frame = s[1];
  }
  auto step = ctx.input_dims_value(1);
  if (!frame || !step || step->size() != 1) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Dim frames = Dim::floordiv(s[1] - *frame, (*step)[0]) + 1;
  const Dim bins = n.attr_int("onesided", 1) ? Dim::floordiv(*frame, 2) + 1 : *frame;
  ctx.set_output(0, dt, {s[0], frames, bins, 2});
}

void kernel_stft(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  check_dtype(n, 0, x.dtype(), is_signal_float, "a float type");
  TS_CHECK(x.rank() == 3 && (x.dim(2) == 1 || x.dim(2) == 2), n.describe(),
           ": signal must be [batch, length, 1 or 2], got ", dims_str(x.shape()));
  const int64_t batch = x.dim(0), len = x.dim(1), comps = x.dim(2);
  const int64_t step = read_scalar_int(ctx.input(1), n, "frame_step");
  TS_CHECK(step >= 1, n.describe(), ": frame_step must be positive, got ", step);
  const Tensor* window = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (window) {
    TS_CHECK(window->rank() == 1, n.describe(), ": window must be 1-D, got ", dims_str(window->shape()));
    check_dtype(n, 2, window->dtype(), [&](DType t) { return t == x.dtype(); }, "the signal's dtype");
  }
  int64_t frame = window ? window->dim(0) : len;
  if (ctx.has_input(3)) {
    frame = read_scalar_int(ctx.input(3), n, "frame_length");
    TS_CHECK(!window || window->dim(0) == frame, n.describe(), ": window length ", window ? window->dim(0) : 0,
             " differs from frame_length ", frame);
  }
  TS_CHECK(frame >= 1 && frame <= len, n.describe(), ": frame_length ", frame, " must be in [1, ", len, "]");
  TS_CHECK(frame <= kMaxDftLength, n.describe(), ": frame_length ", frame, " exceeds the reference limit of ",
           kMaxDftLength);
  const bool onesided = n.attr_int("onesided", 1) != 0;
  TS_CHECK(!(onesided && comps == 2), n.describe(), ": onesided output needs a real signal");
  const int64_t frames = (len - frame) / step + 1;
  const int64_t bins = onesided ? frame / 2 + 1 : frame;
  Tensor y(x.dtype(), {batch, frames, bins, 2});
  std::vector<cd> line(static_cast<size_t>(frame)), spec(static_cast<size_t>(bins));
  const std::vector<cd> tw = twiddles(frame, false);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < frame; ++t) {
        const int64_t base = (b * len + f * step + t) * comps;
        const double w = window ? window->get_f64(t) : 1.0;
        line[static_cast<size_t>(t)] = cd(x.get_f64(base), comps == 2 ? x.get_f64(base + 1) : 0.0) * w;
      }
      dft_line(line, tw, false, &spec);
      for (int64_t k = 0; k < bins; ++k) {
        const int64_t base = ((b * frames + f) * bins + k) * 2;
        y.set_f64(base, spec[static_cast<size_t>(k)].real());
        y.set_f64(base + 1, spec[static_cast<size_t>(k)].imag());
      }
    }
  }
  ctx.set_output(0, y);
}

// ---- windows ---------------------------------------------------------------------------

DType output_datatype(const Node& n) {
  const int64_t code = n.attr_int("output_datatype", 1);
  DType dt;
  TS_CHECK(code == static_cast<int>(code) && dtype_from_onnx(static_cast<int>(code), &dt), n.describe(),
           ": unsupported output_datatype ", code);
  TS_CHECK(is_signal_float(dt) || (is_int(dt) && int_bits(dt) >= 8), n.describe(), ": output_datatype ",
           dtype_name(dt), " is not allowed");
  return dt;
}

enum class WindowKind { Blackman, Hamming, Hann };

double window_value(WindowKind k, int64_t i, int64_t denom) {
  const double x = 2 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(denom);
  switch (k) {
    case WindowKind::Blackman: return 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x);
    case WindowKind::Hamming: return 25.0 / 46.0 - 21.0 / 46.0 * std::cos(x);
    case WindowKind::Hann: return 0.5 - 0.5 * std::cos(x);
  }
  return 0;
}

template <WindowKind K>
void infer_window(InferContext& ctx) {
  check_dtype(ctx.node, 0, ctx.input_dtype(0), is_i32_i64, "int32 or int64");
  const DType dt = output_datatype(ctx.node);
  auto v = ctx.input_dims_value(0);
  ctx.set_output(0, dt, {v && v->size() == 1 ? (*v)[0] : ctl::fresh_dim(ctx.node, 0, "size")});
}

template <WindowKind K>
void kernel_window(KernelContext& ctx) {
  const Node& n = ctx.node;
  const int64_t size = read_scalar_int(ctx.input(0), n, "size");
  TS_CHECK(size >= 0, n.describe(), ": size must not be negative, got ", size);
  const DType dt = output_datatype(n);
  // A periodic window is one period of a window of size+1 with the last
  // sample dropped; a symmetric one spans size-1 intervals.
  const int64_t denom = n.attr_int("periodic", 1) ? size : size - 1;
  Tensor y(dt, {size});
  for (int64_t i = 0; i < size; ++i) y.set_f64(i, denom == 0 ? 1.0 : window_value(K, i, denom));
  ctx.set_output(0, y);
}

// ---- MelWeightMatrix -------------------------------------------------------------------
//
// Triangular filters between mel-spaced points. As in the ONNX reference, the
// num_mel_bins+2 points are spaced by (high_mel - low_mel) / (num_mel_bins+2)
// and mapped to spectrogram bins by floor((dft_length+1) * hz / sample_rate).

void infer_mel(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) check_dtype(ctx.node, i, ctx.input_dtype(i), is_i32_i64, "int32 or int64");
  for (size_t i = 3; i < 5; ++i) check_dtype(ctx.node, i, ctx.input_dtype(i), is_signal_float, "a float type");
  const DType dt = output_datatype(ctx.node);
  auto mel = ctx.input_dims_value(0), dft = ctx.input_dims_value(1);
  const Dim bins = dft && dft->size() == 1 ? Dim::floordiv((*dft)[0], 2) + 1 : ctl::fresh_dim(ctx.node, 0, "bins");
  const Dim mels = mel && mel->size() == 1 ? (*mel)[0] : ctl::fresh_dim(ctx.node, 0, "mels");
  ctx.set_output(0, dt, {bins, mels});
}

void kernel_mel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const int64_t mels = read_scalar_int(ctx.input(0), n, "num_mel_bins");
  const int64_t dft = read_scalar_int(ctx.input(1), n, "dft_length");
  const int64_t rate = read_scalar_int(ctx.input(2), n, "sample_rate");
  for (size_t i = 3; i < 5; ++i) check_dtype(n, i, ctx.input(i).dtype(), is_signal_float, "a float type");
  TS_CHECK(ctx.input(3).numel() == 1 && ctx.input(4).numel() == 1, n.describe(), ": edges must be scalars");
  const double lo = ctx.input(3).get_f64(0), hi = ctx.input(4).get_f64(0);
  TS_CHECK(mels >= 1 && dft >= 1 && rate >= 1, n.describe(), ": num_mel_bins, dft_length and sample_rate must be positive");
  TS_CHECK(lo >= 0 && lo <= hi, n.describe(), ": need 0 <= lower_edge_hertz <= upper_edge_hertz");
  const int64_t bins = dft / 2 + 1;
  Tensor y(output_datatype(n), {bins, mels});  // checks the size before any other allocation
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double lo_mel = to_mel(lo), step = (to_mel(hi) - lo_mel) / static_cast<double>(mels + 2);
  std::vector<int64_t> points(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + lo_mel) / 2595.0) - 1.0);
    points[static_cast<size_t>(i)] = static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * hz / static_cast<double>(rate)));
    TS_CHECK(points[static_cast<size_t>(i)] >= 0 && points[static_cast<size_t>(i)] < bins, n.describe(),
             ": upper_edge_hertz ", hi, " maps beyond the ", bins, " spectrogram bins");
  }
  std::vector<double> w(static_cast<size_t>(bins * mels), 0.0);
  for (int64_t m = 0; m < mels; ++m) {
    const int64_t left = points[static_cast<size_t>(m)], center = points[static_cast<size_t>(m + 1)],
                  right = points[static_cast<size_t>(m + 2)];
    if (center == left) {
      w[static_cast<size_t>(center * mels + m)] = 1;
    } else {
      for (int64_t j = left; j <= center; ++j)
        w[static_cast<size_t>(j * mels + m)] = static_cast<double>(j - left) / static_cast<double>(center - left);
    }
    for (int64_t j = center; j < right; ++j)
      w[static_cast<size_t>(j * mels + m)] = static_cast<double>(right - j) / static_cast<double>(right - center);
  }
  for (int64_t i = 0; i < y.numel(); ++i) y.set_f64(i, w[static_cast<size_t>(i)]);
  ctx.set_output(0, y);
}

}  // namespace

void register_signal_ops(OpRegistry& r) {
  r.add(OpSchema{"DFT", "", 1, 3, 1, 1, infer_dft, kernel_dft, upgrade_dft, 17});
  r.add(OpSchema{"STFT", "", 2, 4, 1, 1, infer_stft, kernel_stft, nullptr, 17});
  r.add(OpSchema{"BlackmanWindow", "", 1, 1, 1, 1, infer_window<WindowKind::Blackman>,
                 kernel_window<WindowKind::Blackman>, nullptr, 17});
  r.add(OpSchema{"HammingWindow", "", 1, 1, 1, 1, infer_window<WindowKind::Hamming>,
                 kernel_window<WindowKind::Hamming>, nullptr, 17});
  r.add(OpSchema{"HannWindow", "", 1, 1, 1, 1, infer_window<WindowKind::Hann>, kernel_window<WindowKind::Hann>,
                 nullptr, 17});
  r.add(OpSchema{"MelWeightMatrix", "", 5, 5, 1, 1, infer_mel, kernel_mel, nullptr, 17});
}

}  // namespace tessel
