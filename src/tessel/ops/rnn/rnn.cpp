// Recurrent layers: RNN, GRU, LSTM (one layer, forward/reverse/bidirectional,
// layout 0 = time-major and 1 = batch-major, sequence_lens, initial states,
// LSTM peepholes and input_forget, GRU linear_before_reset, clip, and every
// activation function of the spec with activation_alpha/beta).
//
// The kernel works in double on a time-major copy of the data. With
// sequence_lens, batch item b only runs its first len[b] steps (a reverse
// direction runs them from len[b]-1 down to 0); Y is 0 beyond len[b] and Y_h /
// Y_c are the states after the last step run (the initial state if len is 0).
#include <cctype>
#include <cmath>

#include "tessel/ops/common.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_rnn_ops(OpRegistry& r);

namespace {

enum class RnnKind { Rnn, Gru, Lstm };

int64_t num_gates(RnnKind k) {
  switch (k) {
    case RnnKind::Rnn: return 1;
    case RnnKind::Gru: return 3;
    case RnnKind::Lstm: return 4;
  }
  return 1;
}

// Activations per direction: RNN f; GRU f, g; LSTM f, g, h.
size_t num_activations(RnnKind k) {
  switch (k) {
    case RnnKind::Rnn: return 1;
    case RnnKind::Gru: return 2;
    case RnnKind::Lstm: return 3;
  }
  return 1;
}

std::vector<std::string> default_activations(RnnKind k) {
  switch (k) {
    case RnnKind::Rnn: return {"Tanh"};
    case RnnKind::Gru: return {"Sigmoid", "Tanh"};
    case RnnKind::Lstm: return {"Sigmoid", "Tanh", "Tanh"};
  }
  return {};
}

struct Activation {
  enum class Kind { Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign,
                    Softplus };
  Kind kind = Kind::Tanh;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case Kind::Relu: return x > 0 ? x : 0;
      case Kind::Tanh: return std::tanh(x);
      case Kind::Sigmoid: return 1 / (1 + std::exp(-x));
      case Kind::Affine: return alpha * x + beta;
      case Kind::LeakyRelu: return x >= 0 ? x : alpha * x;
      case Kind::ThresholdedRelu: return x >= alpha ? x : 0;
      case Kind::ScaledTanh: return alpha * std::tanh(beta * x);
      case Kind::HardSigmoid: return std::min(std::max(alpha * x + beta, 0.0), 1.0);
      case Kind::Elu: return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case Kind::Softsign: return x / (1 + std::fabs(x));
      case Kind::Softplus: return std::log1p(std::exp(-std::fabs(x))) + std::max(x, 0.0);
    }
    return x;
  }
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Builds the activation list; functions that take alpha/beta consume the
// next entries of activation_alpha/activation_beta in order, else use the
// defaults of the corresponding ONNX operators.
std::vector<Activation> parse_activations(const Node& n, RnnKind kind, int64_t num_dir) {
  const size_t per = num_activations(kind);
  std::vector<std::string> names = n.attr_strings("activations", {});
  if (names.empty()) {
    for (int64_t d = 0; d < num_dir; ++d)
      for (const auto& s : default_activations(kind)) names.push_back(s);
  } else if (names.size() == per && num_dir == 2) {
    // One set given for both directions.
    for (size_t i = 0; i < per; ++i) names.push_back(names[i]);
  }
  TS_CHECK(names.size() >= per * static_cast<size_t>(num_dir), n.describe(), ": expected ",
           per * static_cast<size_t>(num_dir), " activations, got ", names.size());
  const std::vector<float> alphas = n.attr_floats("activation_alpha", {});
  const std::vector<float> betas = n.attr_floats("activation_beta", {});
  size_t ai = 0, bi = 0;
  auto next_alpha = [&](double def) { return ai < alphas.size() ? static_cast<double>(alphas[ai++]) : def; };
  auto next_beta = [&](double def) { return bi < betas.size() ? static_cast<double>(betas[bi++]) : def; };
  std::vector<Activation> out;
  for (size_t i = 0; i < per * static_cast<size_t>(num_dir); ++i) {
    using K = Activation::Kind;
    Activation a;
    const std::string s = lower(names[i]);
    if (s == "relu") a.kind = K::Relu;
    else if (s == "tanh") a.kind = K::Tanh;
    else if (s == "sigmoid") a.kind = K::Sigmoid;
    else if (s == "affine") { a.kind = K::Affine; a.alpha = next_alpha(1.0); a.beta = next_beta(0.0); }
    else if (s == "leakyrelu") { a.kind = K::LeakyRelu; a.alpha = next_alpha(0.01); }
    else if (s == "thresholdedrelu") { a.kind = K::ThresholdedRelu; a.alpha = next_alpha(1.0); }
    else if (s == "scaledtanh") { a.kind = K::ScaledTanh; a.alpha = next_alpha(1.0); a.beta = next_beta(1.0); }
    else if (s == "hardsigmoid") { a.kind = K::HardSigmoid; a.alpha = next_alpha(0.2); a.beta = next_beta(0.5); }
    else if (s == "elu") { a.kind = K::Elu; a.alpha = next_alpha(1.0); }
    else if (s == "softsign") a.kind = K::Softsign;
    else if (s == "softplus") a.kind = K::Softplus;
    else fail(n.describe(), ": unknown activation '", names[i], "'");
    out.push_back(a);
  }
  return out;
}

int64_t num_directions(const Node& n) {
  const std::string d = n.attr_string("direction", "forward");
  if (d == "forward" || d == "reverse") return 1;
  if (d == "bidirectional") return 2;
  fail(n.describe(), ": direction must be forward, reverse or bidirectional, got '", d, "'");
}

// Input slots: X W R B sequence_lens initial_h [initial_c P] (LSTM).
constexpr size_t kX = 0, kW = 1, kR = 2, kB = 3, kLens = 4, kH0 = 5, kC0 = 6, kP = 7;

bool is_rnn_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

// ---- inference -------------------------------------------------------------------

template <RnnKind K>
void infer_rnn(InferContext& ctx) {
  const Node& n = ctx.node;
  const DType dt = ctx.input_dtype(kX);
  check_dtype(n, kX, dt, [](DType t) { return is_rnn_float(t) || t == DType::Undefined; }, "a float type");
  for (size_t i : {kW, kR, kB, kH0, kC0, kP})
    if (ctx.has_input(i) && ctx.input_dtype(i) != DType::Undefined)
      TS_CHECK(ctx.input_dtype(i) == dt, n.describe(), ": input ", i, " has dtype ", dtype_name(ctx.input_dtype(i)),
               ", X has ", dtype_name(dt));
  if (ctx.has_input(kLens) && ctx.input_dtype(kLens) != DType::Undefined)
    check_dtype(n, kLens, ctx.input_dtype(kLens), [](DType t) { return t == DType::I32; }, "int32");
  const int64_t nd = num_directions(n);
  parse_activations(n, K, nd);
  const int64_t layout = n.attr_int("layout", 0);
  TS_CHECK(layout == 0 || layout == 1, n.describe(), ": layout must be 0 or 1");
  std::optional<Dim> hidden;
  if (n.has_attr("hidden_size")) hidden = Dim(n.attr_int("hidden_size", 0));
  else if (ctx.has_shape(kR) && ctx.input_shape(kR).size() == 3) hidden = ctx.input_shape(kR)[2];
  if (!ctx.has_shape(kX) || !hidden) {
    for (size_t i = 0; i < ctx.out_types.size(); ++i) ctx.set_output_unknown_shape(i, dt);
    return;
  }
  const Shape& x = ctx.input_shape(kX);
  TS_CHECK(x.size() == 3, n.describe(), ": X must have rank 3, got ", shape_str(x));
  if (ctx.has_shape(kW)) {
    const Shape& w = ctx.input_shape(kW);
    TS_CHECK(w.size() == 3, n.describe(), ": W must have rank 3, got ", shape_str(w));
    TS_CHECK(!w[0].is_const() || w[0].value() == nd, n.describe(), ": W has ", w[0].str(), " directions, expected ",
             nd);
  }
  const Dim seq = layout ? x[1] : x[0], batch = layout ? x[0] : x[1];
  const Shape y = layout ? Shape{batch, seq, nd, *hidden} : Shape{seq, nd, batch, *hidden};
  const Shape yh = layout ? Shape{batch, nd, *hidden} : Shape{nd, batch, *hidden};
  if (ctx.out_types.size() > 0) ctx.set_output(0, dt, y);
  for (size_t i = 1; i < ctx.out_types.size(); ++i) ctx.set_output(i, dt, yh);
}

// ---- kernel ----------------------------------------------------------------------

// A row-major double copy of a tensor with the expected shape.
std::vector<double> to_doubles(const Tensor& t, const std::vector<int64_t>& shape, const Node& n, const char* what) {
  TS_CHECK(t.shape() == shape, n.describe(), ": ", what, " has shape ", dims_str(t.shape()), ", expected ",
           dims_str(shape));
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_f64(i);
  return v;
}

struct Dims {
  int64_t seq, batch, input, hidden, nd, gates;
};

// y[g] += sum_k m[g][k] * v[k] for g in [0, rows).
void matvec_add(const double* m, const double* v, int64_t rows, int64_t cols, double* y) {
  for (int64_t g = 0; g < rows; ++g) {
    const double* row = m + g * cols;
    double acc = 0;
    for (int64_t k = 0; k < cols; ++k) acc += row[k] * v[k];
    y[g] += acc;
  }
}

template <RnnKind K>
void kernel_rnn(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& X = ctx.input(kX);
  check_dtype(n, kX, X.dtype(), is_rnn_float, "a float type");
  TS_CHECK(X.rank() == 3, n.describe(), ": X must have rank 3, got ", dims_str(X.shape()));
  const int64_t layout = n.attr_int("layout", 0);
  TS_CHECK(layout == 0 || layout == 1, n.describe(), ": layout must be 0 or 1");
  const bool reverse_only = n.attr_string("direction", "forward") == "reverse";
  Dims d{};
  d.nd = num_directions(n);
  d.gates = num_gates(K);
  d.seq = layout ? X.dim(1) : X.dim(0);
  d.batch = layout ? X.dim(0) : X.dim(1);
  d.input = X.dim(2);
  const Tensor& W = ctx.input(kW);
  const Tensor& R = ctx.input(kR);
  TS_CHECK(R.rank() == 3, n.describe(), ": R must have rank 3, got ", dims_str(R.shape()));
  d.hidden = n.has_attr("hidden_size") ? n.attr_int("hidden_size", 0) : R.dim(2);
  TS_CHECK(d.hidden > 0, n.describe(), ": hidden_size must be positive");
  const int64_t GH = checked_mul(d.gates, d.hidden);
  for (size_t i : {kW, kR, kB, kH0, kC0, kP})
    if (ctx.has_input(i))
      TS_CHECK(ctx.input(i).dtype() == X.dtype(), n.describe(), ": input ", i, " has dtype ",
               dtype_name(ctx.input(i).dtype()), ", X has ", dtype_name(X.dtype()));

  const std::vector<Activation> acts = parse_activations(n, K, d.nd);
  const size_t per = num_activations(K);
  const bool has_clip = n.has_attr("clip");
  const double clip = n.attr_float("clip", 0);
  TS_CHECK(!has_clip || clip > 0, n.describe(), ": clip must be positive");
  auto clipped = [&](double v) { return has_clip ? std::min(std::max(v, -clip), clip) : v; };
  const bool lbr = K == RnnKind::Gru && n.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = K == RnnKind::Lstm && n.attr_int("input_forget", 0) != 0;

  // Time-major X: x[t][b][i].
  std::vector<double> x(static_cast<size_t>(checked_mul(checked_mul(d.seq, d.batch), d.input)));
  for (int64_t t = 0; t < d.seq; ++t)
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t i = 0; i < d.input; ++i)
        x[static_cast<size_t>((t * d.batch + b) * d.input + i)] =
            X.get_f64(layout ? (b * d.seq + t) * d.input + i : (t * d.batch + b) * d.input + i);
  const std::vector<double> w = to_doubles(W, {d.nd, GH, d.input}, n, "W");
  const std::vector<double> r = to_doubles(R, {d.nd, GH, d.hidden}, n, "R");
  std::vector<double> bias(static_cast<size_t>(d.nd * 2 * GH), 0.0);
  if (ctx.has_input(kB)) bias = to_doubles(ctx.input(kB), {d.nd, 2 * GH}, n, "B");
  std::vector<int64_t> lens(static_cast<size_t>(d.batch), d.seq);
  if (ctx.has_input(kLens)) {
    const Tensor& L = ctx.input(kLens);
    TS_CHECK(L.dtype() == DType::I32 && L.shape() == std::vector<int64_t>{d.batch}, n.describe(),
             ": sequence_lens must be int32 of shape [", d.batch, "], got ", dtype_name(L.dtype()),
             dims_str(L.shape()));
    for (int64_t b = 0; b < d.batch; ++b) {
      lens[static_cast<size_t>(b)] = L.get_i64(b);
      TS_CHECK(lens[static_cast<size_t>(b)] >= 0 && lens[static_cast<size_t>(b)] <= d.seq, n.describe(),
               ": sequence_lens[", b, "] = ", lens[static_cast<size_t>(b)], " is outside [0, ", d.seq, "]");
    }
  }
  // States as [nd][batch][hidden], whatever the layout.
  auto load_state = [&](size_t slot, const char* what) {
    std::vector<double> s(static_cast<size_t>(d.nd * d.batch * d.hidden), 0.0);
    if (!ctx.has_input(slot)) return s;
    const std::vector<int64_t> shape = layout ? std::vector<int64_t>{d.batch, d.nd, d.hidden}
                                              : std::vector<int64_t>{d.nd, d.batch, d.hidden};
    const std::vector<double> v = to_doubles(ctx.input(slot), shape, n, what);
    for (int64_t dir = 0; dir < d.nd; ++dir)
      for (int64_t b = 0; b < d.batch; ++b)
        for (int64_t h = 0; h < d.hidden; ++h)
          s[static_cast<size_t>((dir * d.batch + b) * d.hidden + h)] =
              v[static_cast<size_t>(layout ? (b * d.nd + dir) * d.hidden + h : (dir * d.batch + b) * d.hidden + h)];
    return s;
  };
  std::vector<double> H = load_state(kH0, "initial_h");
  std::vector<double> C = K == RnnKind::Lstm ? load_state(kC0, "initial_c") : std::vector<double>{};
  std::vector<double> P(static_cast<size_t>(d.nd * 3 * d.hidden), 0.0);
  if (K == RnnKind::Lstm && ctx.has_input(kP)) P = to_doubles(ctx.input(kP), {d.nd, 3 * d.hidden}, n, "P");

  // Y as [seq][nd][batch][hidden].
  std::vector<double> Y(static_cast<size_t>(checked_mul(checked_mul(d.seq, d.nd), d.batch * d.hidden)), 0.0);
  std::vector<double> gx(static_cast<size_t>(GH)), gh(static_cast<size_t>(GH)), tmp(static_cast<size_t>(d.hidden));
  const int64_t Hn = d.hidden;
  for (int64_t dir = 0; dir < d.nd; ++dir) {
    const bool backward = dir == 1 || reverse_only;
    const double* wd = w.data() + dir * GH * d.input;
    const double* rd = r.data() + dir * GH * Hn;
    const double* wb = bias.data() + dir * 2 * GH;
    const double* rb = wb + GH;
    const Activation* a = acts.data() + static_cast<size_t>(dir) * per;
    const double* pd = P.data() + dir * 3 * Hn;
    for (int64_t b = 0; b < d.batch; ++b) {
      double* h = H.data() + (dir * d.batch + b) * Hn;
      double* c = K == RnnKind::Lstm ? C.data() + (dir * d.batch + b) * Hn : nullptr;
      const int64_t len = lens[static_cast<size_t>(b)];
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = backward ? len - 1 - s : s;
        const double* xt = x.data() + (t * d.batch + b) * d.input;
        // gx = W x + Wb; gh = R h + Rb (GRU's candidate row block of gh is
        // recomputed below when the reset gate applies before R).
        for (int64_t g = 0; g < GH; ++g) {
          gx[static_cast<size_t>(g)] = wb[g];
          gh[static_cast<size_t>(g)] = rb[g];
        }
        matvec_add(wd, xt, GH, d.input, gx.data());
        matvec_add(rd, h, GH, Hn, gh.data());
        switch (K) {
          case RnnKind::Rnn:
            for (int64_t j = 0; j < Hn; ++j) h[j] = a[0](clipped(gx[static_cast<size_t>(j)] + gh[static_cast<size_t>(j)]));
            break;
          case RnnKind::Gru: {
            // Gate blocks: z, r, h.
            std::vector<double> z(static_cast<size_t>(Hn)), rr(static_cast<size_t>(Hn));
            for (int64_t j = 0; j < Hn; ++j) {
              z[static_cast<size_t>(j)] = a[0](clipped(gx[static_cast<size_t>(j)] + gh[static_cast<size_t>(j)]));
              rr[static_cast<size_t>(j)] =
                  a[0](clipped(gx[static_cast<size_t>(Hn + j)] + gh[static_cast<size_t>(Hn + j)]));
            }
            std::vector<double> cand(static_cast<size_t>(Hn));
            if (lbr) {
              for (int64_t j = 0; j < Hn; ++j)
                cand[static_cast<size_t>(j)] = gx[static_cast<size_t>(2 * Hn + j)] +
                                               rr[static_cast<size_t>(j)] * gh[static_cast<size_t>(2 * Hn + j)];
            } else {
              for (int64_t j = 0; j < Hn; ++j) tmp[static_cast<size_t>(j)] = rr[static_cast<size_t>(j)] * h[j];
              for (int64_t j = 0; j < Hn; ++j) cand[static_cast<size_t>(j)] = gx[static_cast<size_t>(2 * Hn + j)] + rb[2 * Hn + j];
              matvec_add(rd + 2 * Hn * Hn, tmp.data(), Hn, Hn, cand.data());
            }
            for (int64_t j = 0; j < Hn; ++j) {
              const double hh = a[1](clipped(cand[static_cast<size_t>(j)]));
              h[j] = (1 - z[static_cast<size_t>(j)]) * hh + z[static_cast<size_t>(j)] * h[j];
            }
            break;
          }
          case RnnKind::Lstm: {
            // Gate blocks: i, o, f, c; peepholes: i, o, f.
            for (int64_t j = 0; j < Hn; ++j) {
              auto pre = [&](int64_t blk) {
                return gx[static_cast<size_t>(blk * Hn + j)] + gh[static_cast<size_t>(blk * Hn + j)];
              };
              const double ig = a[0](clipped(pre(0) + pd[j] * c[j]));
              const double fg = input_forget ? 1 - ig : a[0](clipped(pre(2) + pd[2 * Hn + j] * c[j]));
              const double cg = a[1](clipped(pre(3)));
              c[j] = fg * c[j] + ig * cg;
              const double og = a[0](clipped(pre(1) + pd[Hn + j] * c[j]));
              h[j] = og * a[2](c[j]);
            }
            break;
          }
        }
        double* yt = Y.data() + ((t * d.nd + dir) * d.batch + b) * Hn;
        for (int64_t j = 0; j < Hn; ++j) yt[j] = h[j];
      }
    }
  }

  // Write outputs in the requested layout.
  const std::vector<int64_t> yshape = layout ? std::vector<int64_t>{d.batch, d.seq, d.nd, Hn}
                                             : std::vector<int64_t>{d.seq, d.nd, d.batch, Hn};
  if (ctx.num_outputs() > 0 && ctx.output_wanted(0)) {
    Tensor out(X.dtype(), yshape);
    for (int64_t t = 0; t < d.seq; ++t)
      for (int64_t dir = 0; dir < d.nd; ++dir)
        for (int64_t b = 0; b < d.batch; ++b)
          for (int64_t j = 0; j < Hn; ++j)
            out.set_f64(layout ? ((b * d.seq + t) * d.nd + dir) * Hn + j : ((t * d.nd + dir) * d.batch + b) * Hn + j,
                        Y[static_cast<size_t>(((t * d.nd + dir) * d.batch + b) * Hn + j)]);
    ctx.set_output(0, out);
  } else if (ctx.num_outputs() > 0) {
    ctx.set_output(0, Tensor(X.dtype(), yshape));
  }
  auto store_state = [&](size_t o, const std::vector<double>& s) {
    if (ctx.num_outputs() <= o) return;
    const std::vector<int64_t> shape = layout ? std::vector<int64_t>{d.batch, d.nd, Hn}
                                              : std::vector<int64_t>{d.nd, d.batch, Hn};
    Tensor out(X.dtype(), shape);
    for (int64_t dir = 0; dir < d.nd; ++dir)
      for (int64_t b = 0; b < d.batch; ++b)
        for (int64_t j = 0; j < Hn; ++j)
          out.set_f64(layout ? (b * d.nd + dir) * Hn + j : (dir * d.batch + b) * Hn + j,
                      s[static_cast<size_t>((dir * d.batch + b) * Hn + j)]);
    ctx.set_output(o, out);
  };
  store_state(1, H);
  if (K == RnnKind::Lstm) store_state(2, C);
}

// Opset 1 had an `output_sequence` attribute that only said whether Y is
// produced; the outputs themselves say that now.
void upgrade_rnn(Node& node, int64_t opset) {
  if (opset < 7) node.attrs.erase("output_sequence");
}

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  r.add(OpSchema{"RNN", "", 3, 6, 0, 2, infer_rnn<RnnKind::Rnn>, kernel_rnn<RnnKind::Rnn>, upgrade_rnn, 1});
  r.add(OpSchema{"GRU", "", 3, 6, 0, 2, infer_rnn<RnnKind::Gru>, kernel_rnn<RnnKind::Gru>, upgrade_rnn, 1});
  r.add(OpSchema{"LSTM", "", 3, 8, 0, 3, infer_rnn<RnnKind::Lstm>, kernel_rnn<RnnKind::Lstm>, upgrade_rnn, 1});
}

}  // namespace tessel
