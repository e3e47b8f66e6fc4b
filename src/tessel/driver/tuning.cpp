#include "tessel/driver/tuning.h"

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
