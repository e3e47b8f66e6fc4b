#include "tessel/tune/cost_model.h"

#include <algorithm>
#include <cmath>

#include "tessel/support/error.h"

namespace tessel {

namespace {

double ceil_div(double a, double b) { return std::ceil(a / b); }

// The GEMM knobs with the sizes a symbolic extent gets (-1 -> a typical 128).
struct GemmView {
  double m, n, k, batch;
  double mr, nr, lanes, mc, kc, nc;
  bool tiles, parallel, pack_a, pack_b;
};

GemmView gemm_view(const Schedule& s, const KernelFacts& f) {
  auto known = [](int64_t v) { return v > 0 ? static_cast<double>(v) : 128.0; };
  const Primitive* t = s.find("gemm.tile");
  const Primitive* b = s.find("gemm.block");
  const Primitive* p = s.find("gemm.parallel");
  const Primitive* pk = s.find("gemm.pack");
  TS_CHECK(t && b, "cost model: a ", s.kind, " schedule without gemm.tile and gemm.block");
  const std::string mode = p ? p->attr("mode").value_or("tiles") : "tiles";
  return {known(f.m), known(f.n), std::max(1.0, known(f.k)), static_cast<double>(std::max<int64_t>(f.batch, 1)),
          static_cast<double>(t->int_attr("mr", 1)), static_cast<double>(t->int_attr("nr", 1)),
          static_cast<double>(t->int_attr("lanes", 1)), static_cast<double>(b->int_attr("mc", 1)),
          static_cast<double>(b->int_attr("kc", 1)), static_cast<double>(b->int_attr("nc", 1)), mode == "tiles",
          mode != "serial", !pk || pk->int_attr("a", 1) != 0, !pk || pk->int_attr("b", 1) != 0};
}

// Fraction of the FMA peak the micro-kernel issues: each k step is
// mr * nr/L FMAs (two pipes) against nr/L vector loads and mr broadcasts
// (two load ports; without packed A, a broadcast is a strided load, counted
// double), and needs 8 independent accumulators to hide the FMA latency.
// Vectors narrower than the widest register do a fraction of its lanes.
double micro_kernel_efficiency(const GemmView& g, const CpuInfo& cpu) {
  const double vecs = g.nr / g.lanes;
  const double fmas = g.mr * vecs;
  const double loads = vecs + g.mr * (g.pack_a ? 1.0 : 2.0);
  const double issue = (fmas / 2) / std::max(fmas / 2, loads / 2);
  const double latency = std::min(1.0, fmas / 8);
  // Zen 4 runs a 512-bit FMA as two 256-bit halves: the peak counts 8-lane
  // FMAs, and a 16-lane one is worth two.
  const double width = std::min(1.0, g.lanes / std::min(8.0, static_cast<double>(cpu.vector_lanes_f32)));
  return issue * latency * width;
}

double gemm_cost_us(const Schedule& s, const KernelFacts& f, const CpuInfo& cpu, const CpuCeilings& c) {
  const GemmView g = gemm_view(s, f);
  // Units of parallel work and how evenly they fill the threads.
  const double m_blocks = ceil_div(g.m, g.mc), n_blocks = ceil_div(g.n, g.nc);
  const double units = g.batch * m_blocks * (g.tiles ? n_blocks : 1);
  const double threads = g.parallel ? std::min<double>(c.threads, units) : 1;
  const double waves = ceil_div(units, threads);
  const double balance = units / (waves * threads);  // 1 when the units divide evenly
  // FMAs computed, edge tiles padded to the register tile.
  const double rows = m_blocks * ceil_div(std::min(g.mc, g.m), g.mr) * g.mr;
  const double cols = n_blocks * ceil_div(std::min(g.nc, g.n), g.nr) * g.nr;
  const double flops = 2 * g.batch * rows * cols * g.k;
  double eff = micro_kernel_efficiency(g, cpu);
  // The B micro-panel (kc x nr) and an A panel (kc x mr) stream from L1;
  // the packed A block (mc x kc) from L2.
  if ((g.kc * (g.nr + g.mr)) * 4 > cpu.l1d_bytes) eff *= 0.8;
  if (g.mc * g.kc * 4 > cpu.l2_bytes) eff *= 0.8;
  const double compute_us = flops / (c.fma_gflops_per_core * 1e3 * eff) / (threads * balance);
  // Packing: B once per M block (a tile packs its own N block), A once per
  // N block; bytes read and written. A copy whose source stays in the
  // core's L2 between its repeats (A's M x K block, repacked per N block;
  // the partial C block, reloaded per K block) runs at cache speed, not at
  // the rate of a first read from memory: measured on BERT's GEMMs
  // (kc 256 vs 512, three partial-C round trips or one) within noise.
  const double a_block = std::min(g.mc, g.m) * g.k * 4;
  const double a_rate = a_block <= cpu.l2_bytes ? c.cache_gbs : c.pack_gbs;
  const double c_rate = g.mc * g.nc * 4 <= cpu.l2_bytes ? c.cache_gbs : c.pack_gbs;
  // A prepacked B read in place costs no copy (its bytes stream with the FMAs).
  const double b_packs = g.pack_b ? g.batch * m_blocks * g.k * std::min(g.n, n_blocks * g.nc) * 8 : 0;
  const double a_packs = g.pack_a ? g.batch * n_blocks * g.k * std::min(g.m, m_blocks * g.mc) * 8 : 0;
  const double k_blocks = ceil_div(g.k, g.kc);
  const double partial_c = k_blocks > 1 ? g.batch * (k_blocks - 1) * g.m * g.n * 8 : 0;
  const double pack_us =
      (b_packs / c.pack_gbs + a_packs / a_rate + partial_c / c_rate) / 1e3 / (threads * balance);
  const double fork_us = g.parallel && units > 1 ? c.fork_us : 0;
  return compute_us + pack_us + fork_us;
}

double nest_cost_us(const Schedule& s, const KernelFacts& f, const CpuInfo& cpu, const CpuCeilings& c) {
  const Primitive* v = s.find("nest.vector");
  const Primitive* p = s.find("nest.parallel");
  const double width = v ? static_cast<double>(v->int_attr("width", 1)) : 1;
  const bool parallel = p && p->int_attr("on", 0) != 0 && f.parallel_units > 1;
  const double threads = parallel ? std::min<double>(c.threads, static_cast<double>(f.parallel_units)) : 1;
  // Lanes the code generator fills: up to a register, a wider loop unrolled.
  const double lanes = std::min(width, static_cast<double>(cpu.vector_lanes_f32));
  const double elements_us = static_cast<double>(f.out_elements) / (lanes * 3e3);  // ~3 GHz, one vector op
  const double memory_us = static_cast<double>(f.bytes) / (c.dram_gbs * 1e3);
  return std::max(elements_us, memory_us) / threads + (parallel ? c.fork_us : 0) + 0.2;
}

}  // namespace

double analytical_cost_us(const Schedule& s, const KernelFacts& f, const CpuInfo& cpu, const CpuCeilings& c) {
  if (s.kind == "gemm" || s.kind == "conv_gemm") return gemm_cost_us(s, f, cpu, c);
  return nest_cost_us(s, f, cpu, c);
}

std::vector<std::string> feature_names() {
  return {"log_analytical", "log_flops_or_bytes", "mr",       "nr_vectors", "lanes",     "log_mc",
          "log_kc",         "log_nc",             "tiles",    "pack_a",     "parallel",  "width",
          "edge_waste",     "log_units",          "is_conv",  "is_nest",    "pack_b"};
}

std::vector<double> schedule_features(const Schedule& s, const KernelFacts& f, const CpuInfo& cpu,
                                      const CpuCeilings& c) {
  std::vector<double> x(feature_names().size(), 0.0);
  x[0] = std::log(std::max(1e-3, analytical_cost_us(s, f, cpu, c)));
  x[14] = s.kind == "conv_gemm";
  x[15] = s.kind == "nest" || s.kind == "depthwise";
  if (s.kind == "gemm" || s.kind == "conv_gemm") {
    const GemmView g = gemm_view(s, f);
    x[1] = std::log(2 * g.batch * g.m * g.n * g.k);
    x[2] = g.mr;
    x[3] = g.nr / g.lanes;
    x[4] = g.lanes;
    x[5] = std::log(g.mc);
    x[6] = std::log(g.kc);
    x[7] = std::log(g.nc);
    x[8] = g.tiles;
    x[9] = g.pack_a;
    x[10] = g.parallel;
    const double padded = ceil_div(g.m, g.mr) * g.mr * ceil_div(g.n, g.nr) * g.nr;
    x[12] = padded / (g.m * g.n) - 1;
    x[13] = std::log(g.batch * ceil_div(g.m, g.mc) * (g.tiles ? ceil_div(g.n, g.nc) : 1));
    x[16] = g.pack_b;
  } else {
    const Primitive* v = s.find("nest.vector");
    const Primitive* p = s.find("nest.parallel");
    x[1] = std::log(1.0 + static_cast<double>(f.bytes));
    x[10] = p && p->int_attr("on", 0) != 0;
    x[11] = v ? static_cast<double>(v->int_attr("width", 1)) : 1;
    x[13] = std::log(1.0 + static_cast<double>(f.parallel_units));
  }
  return x;
}

void LearnedCostModel::add(std::vector<double> features, double analytical_us, double measured_us) {
  if (!(analytical_us > 0) || !(measured_us > 0)) return;
  x_.push_back(std::move(features));
  y_.push_back(std::log(measured_us / analytical_us));
}

namespace {

// Solves (A + ridge I) w = b in place by Gaussian elimination with partial
// pivoting (A is symmetric positive definite after the ridge).
std::vector<double> solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t col = 0; col < n; ++col) {
    size_t piv = col;
    for (size_t r = col + 1; r < n; ++r)
      if (std::abs(a[r][col]) > std::abs(a[piv][col])) piv = r;
    std::swap(a[col], a[piv]);
    std::swap(b[col], b[piv]);
    if (std::abs(a[col][col]) < 1e-12) continue;
    for (size_t r = col + 1; r < n; ++r) {
      const double f = a[r][col] / a[col][col];
      for (size_t k = col; k < n; ++k) a[r][k] -= f * a[col][k];
      b[r] -= f * b[col];
    }
  }
  std::vector<double> w(n, 0.0);
  for (size_t i = n; i-- > 0;) {
    double v = b[i];
    for (size_t k = i + 1; k < n; ++k) v -= a[i][k] * w[k];
    w[i] = std::abs(a[i][i]) < 1e-12 ? 0 : v / a[i][i];
  }
  return w;
}

}  // namespace

void LearnedCostModel::fit(double ridge, size_t min_samples) {
  fitted_ = false;
  if (y_.size() < min_samples) return;
  const size_t d = x_[0].size(), n = y_.size();
  mean_.assign(d, 0);
  scale_.assign(d, 0);
  for (const auto& row : x_)
    for (size_t j = 0; j < d; ++j) mean_[j] += row[j] / static_cast<double>(n);
  for (const auto& row : x_)
    for (size_t j = 0; j < d; ++j) scale_[j] += (row[j] - mean_[j]) * (row[j] - mean_[j]) / static_cast<double>(n);
  for (double& s : scale_) s = s > 1e-12 ? std::sqrt(s) : 0;  // constant features drop out
  bias_ = 0;
  for (double y : y_) bias_ += y / static_cast<double>(n);
  std::vector<std::vector<double>> a(d, std::vector<double>(d, 0));
  std::vector<double> b(d, 0);
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> z(d);
    for (size_t j = 0; j < d; ++j) z[j] = scale_[j] > 0 ? (x_[i][j] - mean_[j]) / scale_[j] : 0;
    for (size_t j = 0; j < d; ++j) {
      b[j] += z[j] * (y_[i] - bias_);
      for (size_t k = 0; k < d; ++k) a[j][k] += z[j] * z[k];
    }
  }
  for (size_t j = 0; j < d; ++j) a[j][j] += ridge;
  weights_ = solve(std::move(a), std::move(b));
  fitted_ = true;
}

double LearnedCostModel::predict_us(const std::vector<double>& features, double analytical_us) const {
  if (!fitted_ || features.size() != weights_.size()) return analytical_us;
  double y = bias_;
  for (size_t j = 0; j < weights_.size(); ++j)
    if (scale_[j] > 0) y += weights_[j] * (features[j] - mean_[j]) / scale_[j];
  return analytical_us * std::exp(std::clamp(y, -5.0, 5.0));
}

}  // namespace tessel
