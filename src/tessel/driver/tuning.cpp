#include "tessel/driver/tuning.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>

#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/driver/options.h"
#include "tessel/runtime/thread_pool.h"
#include "tessel/support/error.h"
#include "tessel/support/fast_hash.h"
#include "tessel/tune/database.h"
#include "tessel/tune/fingerprint.h"

#ifdef TESSEL_HAVE_LLVM
#include "tessel/codegen/cpu/cpu_codegen.h"
#endif

namespace tessel {

std::string default_tuning_db_path() {
  const std::string dir = cache_dir();
  return dir.empty() ? "" : (std::filesystem::path(dir) / "tuning.db").string();
}

std::string host_cpu_fingerprint(int threads) {
  if (threads <= 0) threads = ThreadPool::default_threads();
#ifdef TESSEL_HAVE_LLVM
  return cpu_fingerprint(cpu::host_cpu_name(), cpu::host_cpu_features(), threads).str();
#else
  return cpu_fingerprint("unknown", "", threads).str();
#endif
}

std::string host_cuda_fingerprint() {
  if (!cuda::cuda_available()) return "";
  return cuda_fingerprint(cuda::device_info(), cuda::device_arch()).str();
}

std::string host_fingerprint(Target target, int threads) {
  return target == Target::Cuda ? host_cuda_fingerprint() : host_cpu_fingerprint(threads);
}

TuningRecorder::TuningRecorder(std::string path, std::string fingerprint)
    : path_(std::move(path)), fingerprint_(std::move(fingerprint)) {
  TS_CHECK(!path_.empty(), "tune: no tuning database path (give --db, or set TESSEL_CACHE_DIR or HOME)");
  TS_CHECK(!fingerprint_.empty(), "tune: no hardware fingerprint to key the records by");
}

void TuningRecorder::record(const KernelTuning& k) {
  if (k.hash.empty() || !(k.best_us > 0) || k.trials.size() <= 1) return;  // nothing was searched
  TuningRecord r;
  r.kernel_hash = k.hash;
  r.fingerprint = fingerprint_;
  r.schedule = print_schedule(k.best);
  r.time_us = k.best_us;
  r.kernel_name = k.name;
  r.trials = static_cast<int64_t>(k.trials.size());
  TuningDatabase::open(path_).record(r);
}

namespace {

// Milliseconds of each of `n` runs of `exe` on `inputs`, appended to `out`.
void time_runs(const Executable& exe, const std::vector<RtValue>& inputs, int n, std::vector<double>* out) {
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    exe.run(inputs);
    out->push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
}

// A kernel whose tuned schedule replaces its default.
bool won(const KernelTuning& k) { return k.improved && !k.hash.empty(); }

// `m` compiled with `schedules`, no progress shown.
std::unique_ptr<CompiledModel> compile_with(const Model& m, const DriverOptions& o, ScheduleLookup schedules) {
  LowerOptions lo;
  lo.schedules = std::move(schedules);
  DriverOptions q = o;
  q.progress = {};  // none
  return compile_for_cpu(m, q, lo);
}

// `base` (a lookup of none when empty: an empty one would make
// compile_for_cpu read o's --tuning-db instead).
ScheduleLookup or_none(const ScheduleLookup& base) {
  if (base) return base;
  return [](const std::string&, const std::string&) { return std::optional<Schedule>(); };
}

// The winners of `kernels` over `base`.
ScheduleLookup with_winners(const ScheduleLookup& base, const std::vector<KernelTuning>& kernels) {
  std::map<std::string, std::pair<std::string, Schedule>> by_hash;  // default hash -> kind, schedule
  for (const KernelTuning& k : kernels)
    if (won(k)) by_hash[k.hash] = {k.kind, k.best};
  return [by_hash, base](const std::string& hash, const std::string& kind) {
    auto it = by_hash.find(hash);
    if (it != by_hash.end() && it->second.first == kind) return std::optional<Schedule>(it->second.second);
    return base(hash, kind);
  };
}

// `before` and `tuned` timed in alternating rounds after a warm-up.
WholeModelCheck time_both(const Executable& before, const Executable& tuned, const std::vector<RtValue>& inputs,
                          double seconds, double tolerance) {
  std::vector<double> warm, ta, tb;
  time_runs(before, inputs, 2, &warm);
  time_runs(tuned, inputs, 2, &warm);
  constexpr int kRounds = 5;
  const double one_ms = std::max(1e-3, median_of(warm));
  const int n = static_cast<int>(std::clamp(seconds * 1e3 / (2 * kRounds * one_ms), 2.0, 50.0));
  for (int r = 0; r < kRounds; ++r) {
    time_runs(before, inputs, n, &ta);
    time_runs(tuned, inputs, n, &tb);
  }
  WholeModelCheck c;
  c.ran = true;
  c.runs = n * kRounds;
  c.before_ms = median_of(ta);
  c.tuned_ms = median_of(tb);
  c.keep = c.tuned_ms <= c.before_ms * (1 + tolerance);
  return c;
}

}  // namespace

WholeModelCheck check_on_whole_model(const Model& m, const std::vector<RtValue>& inputs, const DriverOptions& o,
                                     const ScheduleLookup& base, const std::vector<KernelTuning>& kernels,
                                     double seconds, double tolerance) {
  if (std::none_of(kernels.begin(), kernels.end(), won)) return {};
  const ScheduleLookup b = or_none(base);
  const std::unique_ptr<CompiledModel> before = compile_with(m, o, b), tuned = compile_with(m, o, with_winners(b, kernels));
  return time_both(*before->exe, *tuned->exe, inputs, seconds, tolerance);
}

RecordChoice choose_records_on_whole_model(const Model& m, const std::vector<RtValue>& inputs, const DriverOptions& o,
                                           const ScheduleLookup& base, const std::vector<KernelTuning>& kernels,
                                           double seconds, double tolerance) {
  std::vector<const KernelTuning*> order;
  for (const KernelTuning& k : kernels)
    if (won(k)) order.push_back(&k);
  RecordChoice c;
  c.improved = order.size();
  if (order.empty()) return c;
  const auto saving = [](const KernelTuning* k) { return (k->default_us - k->best_us) * k->uses; };
  std::stable_sort(order.begin(), order.end(), [&](auto* a, auto* b) { return saving(a) > saving(b); });
  // The model as it compiled before, once for every check.
  const ScheduleLookup b = or_none(base);
  const std::unique_ptr<CompiledModel> before = compile_with(m, o, b);
  const auto check = [&](size_t n) {
    std::vector<KernelTuning> prefix;
    for (size_t i = 0; i < n; ++i) prefix.push_back(*order[i]);
    ++c.checks;
    return time_both(*before->exe, *compile_with(m, o, with_winners(b, prefix))->exe, inputs, seconds, tolerance);
  };
  c.check = check(order.size());
  size_t lo = 0, hi = order.size();  // the prefix of lo is kept (none: trivially), of hi not
  if (c.check.keep) {
    lo = hi;
  } else {
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      WholeModelCheck w = check(mid);
      if (w.keep) {
        lo = mid;
        c.check = w;
      } else {
        hi = mid;
      }
    }
  }
  for (size_t i = 0; i < lo; ++i) c.kept.push_back(order[i]->hash);
  return c;
}

ScheduleLookup tuning_db_lookup(const std::string& path, const std::string& fingerprint, std::ostream* log) {
  std::ostream& out = log ? *log : std::cerr;
  if (!std::filesystem::exists(path)) {
    out << "warning: tuning db " << path << ": no such file; default schedules\n";
    return {};
  }
  if (fingerprint.empty()) {
    out << "warning: tuning db " << path << ": no device to match its records with; default schedules\n";
    return {};
  }
  // Parsed once: a damaged record is reported once, not per group that hits it.
  const TuningDatabase db = TuningDatabase::open(path);
  auto tuned = std::make_shared<std::map<std::string, Schedule>>();
  for (const TuningRecord& r : db.records()) {
    if (r.fingerprint != fingerprint || r.version != db.version()) continue;
    try {
      tuned->emplace(r.kernel_hash, parse_schedule(r.schedule));
    } catch (const Error& e) {
      out << "warning: tuning db " << path << ": record for " << r.kernel_name << " skipped: " << e.what() << "\n";
    }
  }
  std::ostream* warn = &out;
  return [tuned, path, warn](const std::string& hash, const std::string& kind) -> std::optional<Schedule> {
    auto it = tuned->find(hash);
    if (it == tuned->end()) return std::nullopt;
    if (it->second.kind != kind) {
      *warn << "warning: tuning db " << path << ": the record for kernel " << hash << " is a " << it->second.kind
          << " schedule, the kernel a " << kind << " one: not used\n";
      return std::nullopt;
    }
    return it->second;
  };
}

std::string tuning_db_digest(const std::string& path, const std::string& fingerprint) {
  if (path.empty() || !std::filesystem::exists(path)) return "none";
  // Every record of this machine and version, in the database's order.
  const TuningDatabase db = TuningDatabase::open(path);
  std::string all;
  for (const TuningRecord& r : db.records())
    if (r.fingerprint == fingerprint && r.version == db.version()) all += r.kernel_hash + "\n" + r.schedule + "\n";
  return std::to_string(fast_hash64(all, 1)) + "-" + std::to_string(fast_hash64(all, 2));
}

}  // namespace tessel
