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

// A convolution's candidate of the other orientation than the facts'
// (conv.gemm rows) has their M and N swapped, and its B is not the
// prepacked panels.
bool flips(const Schedule& s, const KernelFacts& f) {
  const Primitive* rows = s.find("conv.gemm");
  return rows && !f.conv_rows.empty() && rows->attr("rows").value_or(f.conv_rows) != f.conv_rows;
}

GemmView gemm_view(const Schedule& s, const KernelFacts& facts) {
  KernelFacts f = facts;
  if (flips(s, facts)) std::swap(f.m, f.n);
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
          "edge_waste",     "log_units",          "is_conv",  "is_nest",    "pack_b",    "positions_rows"};
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
    const Primitive* rows = s.find("conv.gemm");
    x[17] = rows && rows->attr("rows").value_or("") == "positions";
  } else {
    const Primitive* v = s.find("nest.vector");
    const Primitive* p = s.find("nest.parallel");
    x[1] = std::log(1.0 + static_cast<double>(f.bytes));
    x[10] = p && p->int_attr("on", 0) != 0;
    x[11] = v ? static_cast<double>(v->int_attr("width", 1)) : 1;
    x[13] = std::log(1.0 + static_cast<double>(f.parallel_units));
    // The depthwise kernel's rows per block and widest vector, in the
    // GEMM's tile-height and lanes features: its candidates differ only
    // there (the analytical cost does not tell them apart).
    if (const Primitive* t = s.find("depthwise.tile")) {
      x[2] = static_cast<double>(t->int_attr("rows", 1));
      x[4] = static_cast<double>(t->int_attr("lanes", 1));
    }
  }
  return x;
}

void LearnedCostModel::add(std::vector<double> features, double analytical_us, double measured_us) {
  if (!(analytical_us > 0) || !(measured_us > 0)) return;
  x_.push_back(std::move(features));
  y_.push_back(std::log(measured_us / analytical_us));
}

namespace {

constexpr int kTrees = 60, kDepth = 3;
constexpr size_t kMinLeaf = 8;
constexpr double kLearningRate = 0.2;
constexpr int kCandidateSplits = 16;  // thresholds tried per feature: its quantiles

using Node = LearnedCostModel::Node;

// Grows a regression tree of `depth` over the samples `rows` fitting `r`
// (the residuals), appending its nodes to `tree`; returns the root's index.
int grow(const std::vector<std::vector<double>>& x, const std::vector<double>& r, std::vector<size_t> rows,
         int depth, std::vector<Node>* tree) {
  double mean = 0;
  for (size_t i : rows) mean += r[i] / static_cast<double>(rows.size());
  const int at = static_cast<int>(tree->size());
  tree->push_back(Node{-1, 0, mean, -1, -1});
  if (depth == 0 || rows.size() < 2 * kMinLeaf) return at;
  // The split that most reduces the squared error: for each feature, its
  // quantiles as thresholds.
  double best_gain = 1e-12;
  int best_f = -1;
  double best_t = 0;
  const size_t features = x[rows[0]].size();
  std::vector<double> vals(rows.size());
  for (size_t f = 0; f < features; ++f) {
    for (size_t j = 0; j < rows.size(); ++j) vals[j] = x[rows[j]][f];
    std::vector<double> sorted = vals;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.front() == sorted.back()) continue;
    for (int q = 1; q < kCandidateSplits; ++q) {
      const double t = sorted[sorted.size() * static_cast<size_t>(q) / kCandidateSplits];
      double sl = 0, sr = 0;
      size_t nl = 0;
      for (size_t j = 0; j < rows.size(); ++j) {
        if (vals[j] < t) {
          sl += r[rows[j]];
          ++nl;
        } else {
          sr += r[rows[j]];
        }
      }
      const size_t nr = rows.size() - nl;
      if (nl < kMinLeaf || nr < kMinLeaf) continue;
      // Reduction of the sum of squares: sl^2/nl + sr^2/nr - (sl+sr)^2/n.
      const double total = sl + sr;
      const double gain = sl * sl / static_cast<double>(nl) + sr * sr / static_cast<double>(nr) -
                          total * total / static_cast<double>(rows.size());
      if (gain > best_gain) {
        best_gain = gain;
        best_f = static_cast<int>(f);
        best_t = t;
      }
    }
  }
  if (best_f < 0) return at;
  std::vector<size_t> left, right;
  for (size_t i : rows) (x[i][static_cast<size_t>(best_f)] < best_t ? left : right).push_back(i);
  const int l = grow(x, r, std::move(left), depth - 1, tree);
  const int rt = grow(x, r, std::move(right), depth - 1, tree);
  Node& n = (*tree)[static_cast<size_t>(at)];
  n.feature = best_f;
  n.threshold = best_t;
  n.left = l;
  n.right = rt;
  return at;
}

double evaluate(const std::vector<Node>& tree, const std::vector<double>& x) {
  int i = 0;
  while (tree[static_cast<size_t>(i)].feature >= 0) {
    const Node& n = tree[static_cast<size_t>(i)];
    i = x[static_cast<size_t>(n.feature)] < n.threshold ? n.left : n.right;
  }
  return tree[static_cast<size_t>(i)].value;
}

}  // namespace

void LearnedCostModel::fit(size_t min_samples) {
  fitted_ = false;
  trees_.clear();
  if (y_.size() < min_samples) return;
  const size_t n = y_.size();
  bias_ = 0;
  for (double y : y_) bias_ += y / static_cast<double>(n);
  std::vector<double> residual(n);
  for (size_t i = 0; i < n; ++i) residual[i] = y_[i] - bias_;
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  for (int t = 0; t < kTrees; ++t) {
    std::vector<Node> tree;
    grow(x_, residual, all, kDepth, &tree);
    for (size_t i = 0; i < n; ++i) residual[i] -= kLearningRate * evaluate(tree, x_[i]);
    trees_.push_back(std::move(tree));
  }
  fitted_ = true;
}

double LearnedCostModel::predict_log_ratio(const std::vector<double>& features) const {
  double y = bias_;
  for (const std::vector<Node>& tree : trees_) y += kLearningRate * evaluate(tree, features);
  return y;
}

double LearnedCostModel::predict_us(const std::vector<double>& features, double analytical_us) const {
  if (!fitted_ || x_.empty() || features.size() != x_[0].size()) return analytical_us;
  return analytical_us * std::exp(std::clamp(predict_log_ratio(features), -5.0, 5.0));
}

}  // namespace tessel
