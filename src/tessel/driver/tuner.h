// Measured schedule search for the CPU (`tessel tune`).
//
// For a model (after the pass pipeline, symbols bound):
//   1. Lower it with the default schedules and run the reference interpreter
//      once on random inputs, keeping every intermediate value: each
//      kernel's inputs (real data: a Gather's indices are in range) and its
//      exact expected output.
//   2. Compile the distinct kernels with their defaults and time each one
//      alone (warm-up, then the median of repeated runs on the thread
//      pool). A kernel's weight is its time times the groups that share it.
//   3. Give each kernel a share of the budget by weight (kernels under 0.5%
//      of the model get none) and search its space (tune/space.h) in
//      rounds: the cost model's best untried candidates, a neighbour of the
//      best so far (mutation) and a random one (exploration, which also
//      keeps the cost model's ranking measurable). Each candidate is
//      lowered, compiled and checked against the interpreter's output (a
//      fast but wrong candidate is discarded and counted), then timed. The
//      learned cost model is refit after every round, over all kernels.
//   4. Report each kernel's best; a candidate replaces the default only when
//      it beats it by TuneOptions::min_gain (timing noise is a few percent).
// Interruptible: after request_stop() the search ends at the next candidate
// and what was found so far is reported.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/lower/lower_group.h"
#include "tessel/ops/registry.h"
#include "tessel/schedule/schedule.h"
#include "tessel/support/progress.h"

namespace tessel {

struct TuneOptions {
  double budget_s = 600;     // the whole search, reference run and default timings included
  int max_trials = 64;       // candidates measured per kernel (besides its default)
  int batch = 6;             // candidates compiled together (one LLVM module)
  int threads = 2;           // the thread pool the kernels run on
  double min_gain = 0.03;    // a candidate must be this much faster than the default
  double min_weight = 0.005; // kernels under this share of the model's time are not searched
  uint64_t seed = 1;
  std::ostream* log = nullptr;  // warnings (the GPU tuner's: a failed confirmation, a lost device)
  ProgressOptions progress;     // kernels tuned out of all, the trials, the budget left
  const std::atomic<bool>* stop = nullptr;  // set: finish the current candidate and report
  // Each round of candidates is checked and timed in a forked child, so
  // that one that crashes is counted and skipped (driver/isolated_run.h).
  bool isolate = true;
  // Tests only: a candidate whose schedule this accepts raises SIGSEGV where
  // it would run.
  std::function<bool(const Schedule&)> crash_for_test;
};

struct TuneTrial {
  std::string schedule;  // text form
  std::vector<double> features;
  double analytical_us = 0, predicted_us = 0, measured_us = 0;
  bool wrong = false;    // output differed from the interpreter's
};

struct KernelTuning {
  std::string name, hash, kind;
  int uses = 1;                // groups that run this kernel
  double default_us = 0, best_us = 0;
  Schedule default_schedule, best;
  bool improved = false;       // best beats the default by min_gain
  size_t space_size = 0;
  int wrong = 0, failed = 0;   // candidates discarded: wrong output, failed to lower, compile or run
  int crashed = 0;             // of failed: killed the child process that ran them (a signal)
  std::vector<TuneTrial> trials;  // measured candidates, the default first
  std::string note;            // why a kernel was not searched
};

struct TuneReport {
  std::vector<KernelTuning> kernels;
  double seconds = 0;
  bool interrupted = false;
  // Sum over kernels of time x uses, default and tuned (an estimate of the
  // model's kernel time; `tessel bench` measures the real one).
  double default_total_us = 0, tuned_total_us = 0;
};

// `inputs` in graph input order; `dims` binds every symbol. Each finished
// kernel is passed to `on_kernel` (to be recorded in a database) as soon as
// its search ends.
TuneReport tune_for_cpu(const Model& m, const std::vector<RtValue>& inputs, const TuneOptions& o,
                        const std::function<void(const KernelTuning&)>& on_kernel = {});

// ---- shared by the CPU and the GPU tuner (driver/gpu_tuner.h) ----

// The median of timings (the upper middle one of an even count); 0 for none.
double median_of(std::vector<double> v);

// A kernel before its search: name, hash, kind and uses of `lg` (its first
// group, lowered with the default schedule), the default as the best so far.
KernelTuning start_kernel_tuning(const LoweredGroup& lg, int uses);

// The report of finished kernels, with their totals of time x uses.
TuneReport make_tune_report(std::vector<KernelTuning> kernels, double seconds, bool interrupted);

// The search's progress on `p` (a "search" step over the kernels): `done`
// kernels finished, the candidates measured, the kernels' time x uses
// (default -> best so far), and the budget left as the ETA.
void tune_progress(Progress& p, int64_t done, const std::vector<KernelTuning>& kernels, double seconds_left);
// The final progress line's summary: kernels, those improved, trials.
std::string tune_summary(const std::vector<KernelTuning>& kernels);

// Top-k recall of a ranking over recorded trials: the share of kernels
// (with at least k + 1 correct trials) whose fastest measured trial is among
// the k that `predicted` ranks fastest.
double top_k_recall(const std::vector<KernelTuning>& kernels, size_t k,
                    const std::function<double(const TuneTrial&)>& predicted);

}  // namespace tessel
