#include "tessel/driver/gpu_tuner.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <sstream>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/driver/compare.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"
#include "tessel/support/fast_hash.h"

namespace tessel {

namespace {

// Candidates tried in the space's order (single knobs flipped first) before
// the rest is shuffled.
constexpr size_t kInOrder = 8;

// The CUDA source of one lowered kernel as the code generator writes it for
// `arch`: what tells two candidates' codes apart.
uint64_t code_hash(const LoweredGroup& lg, const std::string& arch) {
  return fast_hash64(cuda::emit_cuda_source({lg.kernel}, cuda::gemm_target_for(arch, kernel_knobs(lg.sched, {}))).code);
}

}  // namespace

std::vector<GpuTuneKernel> gpu_tune_kernels(const CompiledModel& c, const GpuDevice& d, uint64_t seed) {
  std::vector<GpuTuneKernel> out;
  std::map<std::string, size_t> by_hash;
  size_t next = 0;
  for (const FusionGroup& g : c.plan.groups) {
    if (!g.compiled) continue;
    const LoweredGroup& lg = c.lowered.at(next++);
    auto [it, fresh] = by_hash.emplace(lg.default_hash, out.size());
    if (!fresh) {
      ++out[it->second].uses;
      continue;
    }
    GpuTuneKernel k;
    k.group = &g;
    k.lowered = lg;
    k.space = gpu_search_space(lg.sched, gpu_kernel_facts(lg.kernel, lg.schedule), d);
    for (size_t i = 1; i < k.space.size(); ++i) k.order.push_back(i);
    if (k.order.size() > kInOrder) {
      std::mt19937_64 rng(seed + out.size());
      std::shuffle(k.order.begin() + kInOrder, k.order.end(), rng);
    }
    k.codes.insert(code_hash(lg, d.arch));
    out.push_back(std::move(k));
  }
  return out;
}

std::map<std::string, Schedule> next_gpu_round(std::vector<GpuTuneKernel>& ks, const std::string& arch,
                                               int max_trials) {
  const OpRegistry& reg = OpRegistry::global();
  std::map<std::string, Schedule> picks;
  for (GpuTuneKernel& k : ks) {
    if (!k.searched || k.tried >= max_trials) continue;
    while (k.cursor < k.order.size()) {
      const Schedule& s = k.space.at(k.order[k.cursor++]);
      uint64_t code = 0;
      try {
        code = code_hash(reschedule_cuda_group(*k.group, reg, k.lowered, s, {}), arch);
      } catch (const Error&) {
        ++k.failed;
        continue;
      }
      if (!k.codes.insert(code).second) continue;  // the same code as one measured: nothing to learn
      ++k.tried;
      picks.emplace(k.lowered.default_hash, s);
      break;
    }
  }
  return picks;
}

ScheduleLookup schedule_picks(std::map<std::string, Schedule> picks) {
  auto p = std::make_shared<const std::map<std::string, Schedule>>(std::move(picks));
  return [p](const std::string& hash, const std::string& kind) -> std::optional<Schedule> {
    auto it = p->find(hash);
    if (it == p->end() || it->second.kind != kind) return std::nullopt;
    return it->second;
  };
}

std::vector<std::string> step_kernel_hashes(const CompiledModel& c) {
  std::vector<std::string> out;
  size_t next = 0;
  for (const FusionGroup& g : c.plan.groups) out.push_back(g.compiled ? c.lowered.at(next++).default_hash : "");
  return out;
}

std::map<std::string, double> kernel_times_us(const std::vector<std::string>& step_hashes,
                                              const std::vector<RunProfile>& runs) {
  for (const RunProfile& r : runs)
    TS_CHECK(r.step_seconds.size() == step_hashes.size(), "tune: a profile of ", r.step_seconds.size(),
             " steps for a plan of ", step_hashes.size());
  std::map<std::string, double> us;
  for (size_t i = 0; i < step_hashes.size(); ++i) {
    if (step_hashes[i].empty()) continue;
    std::vector<double> t;
    for (const RunProfile& r : runs) t.push_back(r.step_seconds[i] * 1e6);
    us[step_hashes[i]] += median_of(std::move(t));
  }
  return us;
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr int kWarmup = 3, kIters = 10;  // per profile
constexpr int kConfirmPairs = 3;

// One compile of the whole model with some kernels' candidates.
struct Measured {
  std::unique_ptr<CudaCompiledModel> compiled;  // with its executable
  std::map<std::string, double> us;             // each kernel's time, all its uses
  std::string error;                            // why it has no times ("" when it has)
  bool wrong = false;                           // ran, but its outputs differ from the reference
};

class GpuSearch {
 public:
  GpuSearch(const Model& m, const std::vector<RtValue>& inputs, const TuneOptions& o)
      : m_(m), inputs_(inputs), o_(o), progress_(o.progress, "tune") {}

  TuneReport run(const std::function<void(const KernelTuning&)>& on_kernel) {
    check_cuda_usable();
    start_ = Clock::now();
    const cuda::DeviceInfo& info = cuda::device_info();
    device_.arch = arch_ = cuda::device_arch();
    device_.sm_count = info.multiprocessors;
    device_.max_threads_per_block = info.max_threads_per_block > 0 ? info.max_threads_per_block : 1024;
    LowerOptions lo;
    lo.progress = &progress_;
    base_ = lower_for_cuda(m_, lo);
    ks_ = gpu_tune_kernels(base_, device_, o_.seed);
    low_precision_ = any_half(base_);

    const auto t0 = Clock::now();
    progress_.start("compile and time the defaults", "models", 1);
    default_ = measure({}, /*check=*/false);
    TS_CHECK(default_.error.empty(), "tune: the model with its default schedules failed: ", default_.error);
    reference_ = default_.compiled->exe->run(inputs_);
    round_s_ = seconds_since(t0);

    std::vector<KernelTuning> kts = start_tunings();
    double total = 0;
    for (const KernelTuning& kt : kts) total += kt.default_us * kt.uses;
    for (size_t i = 0; i < ks_.size(); ++i) {
      KernelTuning& kt = kts[i];
      kt.space_size = ks_[i].space.size();
      if (ks_[i].space.size() <= 1) kt.note = "no candidates";
      else if (!(total > 0) || kt.default_us * kt.uses / total < o_.min_weight) kt.note = "under the weight threshold";
      else ks_[i].searched = true;
    }
    progress_.start("search", "kernels", static_cast<int64_t>(kts.size()));
    progress(kts);
    search(kts);
    progress_.start("confirm", "kernels", static_cast<int64_t>(kts.size()));
    confirm(kts);
    progress_.finish(tune_summary(kts));
    for (size_t i = 0; i < kts.size(); ++i) {
      KernelTuning& kt = kts[i];
      kt.failed += ks_[i].failed;
      if (ks_[i].searched && kt.note.empty() && ks_[i].cursor < ks_[i].order.size())
        kt.note = stopped() ? "interrupted" : "budget spent";
      if (on_kernel) on_kernel(kt);
    }
    return make_tune_report(std::move(kts), seconds_since(start_), stopped());
  }

 private:
  bool stopped() const { return o_.stop && o_.stop->load(); }

  static bool any_half(const CompiledModel& c) {
    for (const LoweredGroup& lg : c.lowered)
      for (const Value* v : lg.params)
        if (v->type.dtype == DType::BF16 || v->type.dtype == DType::F16) return true;
    return false;
  }

  std::vector<KernelTuning> start_tunings() const {
    std::vector<KernelTuning> out;
    for (const GpuTuneKernel& k : ks_) {
      KernelTuning kt = start_kernel_tuning(k.lowered, k.uses);
      auto it = default_.us.find(kt.hash);
      kt.default_us = kt.best_us = it == default_.us.end() ? 0 : it->second / k.uses;
      TuneTrial t;
      t.schedule = print_schedule(kt.default_schedule);
      t.measured_us = kt.default_us;
      kt.trials.push_back(std::move(t));
      out.push_back(std::move(kt));
    }
    return out;
  }

  // "" when `got` matches the reference outputs. The candidates compute the
  // same sums in another order (tiles, pipelines): the tolerance is a share
  // of each output's magnitude, looser where the model computes in halves
  // (a rounding step of bf16 is 0.4%).
  std::string mismatch(const std::vector<RtValue>& got) const {
    if (got.size() != reference_.size()) return str_cat(got.size(), " outputs, expected ", reference_.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const Tensor& want = reference_[i].tensor;
      const Tolerance tol = low_precision_ ? scaled_tolerance(want, 5e-2, 2e-2) : scaled_tolerance(want, 1e-3, 1e-3);
      const std::string bad = compare_values(got[i], reference_[i], tol);
      if (!bad.empty()) return str_cat("output ", i, ": ", bad);
    }
    return "";
  }

  Measured measure(const std::map<std::string, Schedule>& picks, bool check = true) {
    Measured r;
    try {
      LowerOptions lo;
      std::ostringstream warnings;
      lo.schedules = schedule_picks(picks);
      lo.log = &warnings;
      r.compiled = compile_cuda_kernels(m_, arch_, lo);
      TS_CHECK(warnings.str().empty(), "a candidate did not apply: ", warnings.str());
      const std::vector<std::string> steps = step_kernel_hashes(r.compiled->lowered);
      TS_CHECK(steps == step_kernel_hashes(base_), "the candidates changed the plan");
      load_cuda_executable(m_, *r.compiled);
      if (check) {
        const std::string bad = mismatch(r.compiled->exe->run(inputs_));
        if (!bad.empty()) {
          r.wrong = true;
          r.error = "outputs differ from the default's: " + bad;
          return r;
        }
      }
      r.us = kernel_times_us(steps, r.compiled->exe->profile_steps(inputs_, kWarmup, kIters));
    } catch (const Error& e) {
      r.error = e.what();
    }
    return r;
  }

  // Whether the device still runs the default (a failed launch may have
  // lost the context).
  bool device_healthy() {
    try {
      default_.compiled->exe->run(inputs_);
      return true;
    } catch (const Error&) {
      return false;
    }
  }

  void take(KernelTuning& kt, const GpuTuneKernel& k, const Schedule& s, const Measured& r) {
    TuneTrial t;
    t.schedule = print_schedule(s);
    auto it = r.us.find(kt.hash);
    if (r.wrong) {  // recorded, as the CPU tuner records a wrong candidate
      t.wrong = true;
      ++kt.wrong;
      kt.trials.push_back(std::move(t));
      return;
    }
    if (!r.error.empty() || it == r.us.end()) {
      ++kt.failed;
      return;
    }
    t.measured_us = it->second / k.uses;
    if (t.measured_us < kt.best_us) {
      kt.best_us = t.measured_us;
      kt.best = s;
    }
    kt.trials.push_back(std::move(t));
  }

  void search(std::vector<KernelTuning>& kts) {
    // What the confirmation will cost: two compiles and the profiles.
    const double reserve = 2 * round_s_ + 2 * kConfirmPairs * 0.5;
    for (;;) {
      if (stopped()) return;
      if (seconds_since(start_) + round_s_ + reserve > o_.budget_s) return;
      const std::map<std::string, Schedule> picks = next_gpu_round(ks_, arch_, o_.max_trials);
      if (picks.empty()) return;
      const auto t0 = Clock::now();
      const Measured r = measure(picks);
      round_s_ = seconds_since(t0);
      if (r.error.empty()) {
        for (size_t i = 0; i < ks_.size(); ++i)
          if (auto p = picks.find(kts[i].hash); p != picks.end()) take(kts[i], ks_[i], p->second, r);
      } else if (!one_at_a_time(kts, picks)) {
        if (o_.log) *o_.log << "tune: the device fails to run the default model after a failed candidate; stopping\n";
        return;
      }
      progress(kts);
    }
  }

  // A round that failed, measured again a candidate at a time. False when
  // the device is lost.
  bool one_at_a_time(std::vector<KernelTuning>& kts, const std::map<std::string, Schedule>& picks) {
    for (size_t i = 0; i < ks_.size(); ++i) {
      auto p = picks.find(kts[i].hash);
      if (p == picks.end()) continue;
      const Measured r = measure({*p});
      take(kts[i], ks_[i], p->second, r);
      if (!r.error.empty() && !r.wrong && !device_healthy()) return false;
    }
    return true;
  }

  // The winners together, profiled interleaved with the default.
  void confirm(std::vector<KernelTuning>& kts) {
    std::map<std::string, Schedule> best;
    for (KernelTuning& kt : kts) {
      if (kt.best != kt.default_schedule && kt.best_us < kt.default_us * (1 - o_.min_gain)) best[kt.hash] = kt.best;
      kt.best = kt.default_schedule;
      kt.best_us = kt.default_us;
      kt.improved = false;
    }
    if (best.empty()) return;
    Measured tuned = measure(best);
    if (!tuned.error.empty()) {
      for (KernelTuning& kt : kts)
        if (best.count(kt.hash)) kt.note = "the fastest candidates together failed: " + tuned.error;
      return;
    }
    std::map<std::string, std::vector<double>> def_t, tuned_t;
    const std::vector<std::string> steps = step_kernel_hashes(base_);
    const auto profile = [&](const GpuExecutable& exe, std::map<std::string, std::vector<double>>* out) {
      for (const auto& [hash, us] : kernel_times_us(steps, exe.profile_steps(inputs_, kWarmup, kIters)))
        (*out)[hash].push_back(us);
    };
    try {
      for (int i = 0; i < kConfirmPairs; ++i) {
        profile(*default_.compiled->exe, &def_t);
        profile(*tuned.compiled->exe, &tuned_t);
      }
    } catch (const Error& e) {
      if (o_.log) *o_.log << "tune: the confirmation failed: " << e.what() << "\n";
      return;
    }
    for (size_t i = 0; i < kts.size(); ++i) {
      KernelTuning& kt = kts[i];
      const double d = median_of(def_t[kt.hash]) / ks_[i].uses;
      if (d > 0) kt.default_us = kt.best_us = d;
      auto b = best.find(kt.hash);
      if (b == best.end()) continue;
      const double t = median_of(tuned_t[kt.hash]) / ks_[i].uses;
      if (t > 0 && t < kt.default_us * (1 - o_.min_gain)) {
        kt.best = b->second;
        kt.best_us = t;
        kt.improved = true;
      }
    }
  }

  // A kernel is done once it is not searched or its candidates are used up.
  void progress(const std::vector<KernelTuning>& kts) {
    int64_t searching = 0;
    for (const GpuTuneKernel& k : ks_) searching += k.searched && k.cursor < k.order.size();
    tune_progress(progress_, static_cast<int64_t>(kts.size()) - searching, kts, o_.budget_s - seconds_since(start_));
  }

  const Model& m_;
  const std::vector<RtValue>& inputs_;
  const TuneOptions& o_;
  Clock::time_point start_;
  std::string arch_;
  GpuDevice device_;
  CompiledModel base_;  // the default lowering: groups and kernels
  std::vector<GpuTuneKernel> ks_;
  bool low_precision_ = false;
  Measured default_;  // its executable stays loaded: the reference, the health check, the confirmation
  std::vector<RtValue> reference_;
  double round_s_ = 0;  // how long the last compile-run-profile took
  Progress progress_;
};

}  // namespace

TuneReport tune_for_cuda(const Model& m, const std::vector<RtValue>& inputs, const TuneOptions& o,
                         const std::function<void(const KernelTuning&)>& on_kernel) {
  return GpuSearch(m, inputs, o).run(on_kernel);
}

}  // namespace tessel
