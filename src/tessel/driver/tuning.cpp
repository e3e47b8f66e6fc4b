#include "tessel/driver/tuning.h"

#include "tessel/driver/options.h"
#include "tessel/runtime/thread_pool.h"
#include "tessel/support/error.h"

#ifdef TESSEL_HAVE_LLVM
#include "tessel/codegen/cpu/cpu_codegen.h"
#endif

namespace tessel {

std::string default_tuning_db_path() {
  const std::string dir = cache_dir();
  return dir.empty() ? "" : dir + "/tuning.db";
}

std::string host_cpu_fingerprint(int threads) {
  if (threads <= 0) threads = ThreadPool::default_threads();
#ifdef TESSEL_HAVE_LLVM
  return str_cat("cpu|", cpu::host_cpu_name(), "|", cpu::host_cpu_features(), "|threads=", threads);
#else
  return str_cat("cpu|unknown|threads=", threads);
#endif
}

TuningRecorder::TuningRecorder(std::string path, int threads)
    : path_(std::move(path)), fingerprint_(host_cpu_fingerprint(threads)) {}

void TuningRecorder::record(const KernelTuning&) {}

ScheduleLookup tuning_db_lookup(const std::string&, int, std::ostream*) { return {}; }

std::string tuning_db_digest(const std::string&, int) { return ""; }

}  // namespace tessel
