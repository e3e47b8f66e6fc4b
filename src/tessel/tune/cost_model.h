// The tuner's cost model, in two layers:
//
//   1. Analytical (a roofline of the schedule): for a GEMM, the FMAs the
//      register tile computes (edge tiles included) at the rate its
//      micro-kernel can issue them (FMA pipes against load ports, enough
//      independent accumulator chains), plus the bytes the packing moves
//      (B once per M block or tile, A once per N block), the partial-C
//      traffic of a K split, cache blocks that overflow L1/L2, and the
//      parallel units' imbalance over the threads. For a loop nest, the
//      bytes over the memory bandwidth and the elements over the vector
//      rate, plus the fork cost of a parallel loop. Used to rank
//      candidates before anything is measured.
//   2. Learned: gradient-boosted regression trees (depth 3) over the
//      schedule's features, predicting log(measured / analytical), refit
//      from every measurement the tuner records (of all kernels so far), so
//      the ranking corrects what the roofline gets wrong on this machine.
//      Trees rather than a linear model because the corrections interact
//      (packing A pays only with few N blocks, a wide tile only with enough
//      rows): on the first tuning campaign's 7,000 candidates, leave one
//      model out, the trees put the measured best (within 3%) in their
//      top 8 for 77% of kernels, a ridge regression for 69%, the roofline
//      alone for 63% (docs/tuning.md).
#pragma once

#include <string>
#include <vector>

#include "tessel/schedule/cpu_info.h"
#include "tessel/schedule/schedule.h"
#include "tessel/tune/space.h"

namespace tessel {

// The machine's rates the analytical model divides by. Defaults: one Zen 4
// core (about 200 fp32 GFLOP/s of FMAs at peak, ~20 GB/s of DRAM
// bandwidth per core); the tuner may measure and replace them.
struct CpuCeilings {
  double fma_gflops_per_core = 200;  // fp32 GFLOP/s (2 per FMA)
  double dram_gbs = 20;              // per thread
  double pack_gbs = 8;               // packing copies and gathers, per thread
  double cache_gbs = 40;             // copies whose source is in the core's L2, per thread
  double fork_us = 3;                // one parallel_for of the thread pool
  int threads = 2;
};

// Seconds (in microseconds) the schedule would take by the roofline above.
double analytical_cost_us(const Schedule& s, const KernelFacts& f, const CpuInfo& cpu, const CpuCeilings& c);

// The learned model's inputs: fixed-length, named (feature_names()).
std::vector<double> schedule_features(const Schedule& s, const KernelFacts& f, const CpuInfo& cpu,
                                      const CpuCeilings& c);
std::vector<std::string> feature_names();

class LearnedCostModel {
 public:
  // One measurement: the schedule's features and analytical estimate and
  // the measured time.
  void add(std::vector<double> features, double analytical_us, double measured_us);
  // Refits the trees; with fewer than `min_samples` samples it predicts the
  // analytical cost unchanged.
  void fit(size_t min_samples = 16);
  double predict_us(const std::vector<double>& features, double analytical_us) const;
  size_t samples() const { return y_.size(); }

  // A regression tree, flat: node i splits on feature < threshold into
  // nodes left/right, or is a leaf (feature -1) with its value.
  struct Node {
    int feature = -1;
    double threshold = 0, value = 0;
    int left = -1, right = -1;
  };

 private:
  double predict_log_ratio(const std::vector<double>& features) const;

  std::vector<std::vector<double>> x_;
  std::vector<double> y_;  // log(measured / analytical)
  double bias_ = 0;
  std::vector<std::vector<Node>> trees_;
  bool fitted_ = false;
};

}  // namespace tessel
