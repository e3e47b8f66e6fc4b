#include "tessel/driver/tuning.h"

#include <filesystem>
#include <iostream>

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

TuningRecorder::TuningRecorder(std::string path, int threads)
    : path_(std::move(path)), fingerprint_(host_cpu_fingerprint(threads)) {
  TS_CHECK(!path_.empty(), "tune: no tuning database path (give --db, or set TESSEL_CACHE_DIR or HOME)");
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

ScheduleLookup tuning_db_lookup(const std::string& path, int threads, std::ostream* log) {
  std::ostream& out = log ? *log : std::cerr;
  if (!std::filesystem::exists(path)) {
    out << "warning: tuning db " << path << ": no such file; default schedules\n";
    return {};
  }
  auto db = std::make_shared<TuningDatabase>(TuningDatabase::open(path));
  const std::string fp = host_cpu_fingerprint(threads);
  return [db, fp, path, &out](const std::string& hash, const std::string& kind) -> std::optional<Schedule> {
    std::optional<TuningRecord> r = db->lookup(hash, fp);
    if (!r) return std::nullopt;
    try {
      Schedule s = parse_schedule(r->schedule);
      if (s.kind != kind) return std::nullopt;  // another kernel with a colliding hash: never trusted
      return s;
    } catch (const Error& e) {
      out << "warning: tuning db " << path << ": record for " << r->kernel_name << " skipped: " << e.what() << "\n";
      return std::nullopt;
    }
  };
}

std::string tuning_db_digest(const std::string& path, int threads) {
  if (path.empty() || !std::filesystem::exists(path)) return "none";
  // Every record of this machine and version, in the database's order.
  const TuningDatabase db = TuningDatabase::open(path);
  const std::string fp = host_cpu_fingerprint(threads);
  std::string all;
  for (const TuningRecord& r : db.records())
    if (r.fingerprint == fp && r.version == db.version()) all += r.kernel_hash + "\n" + r.schedule + "\n";
  return std::to_string(fast_hash64(all, 1)) + "-" + std::to_string(fast_hash64(all, 2));
}

}  // namespace tessel
