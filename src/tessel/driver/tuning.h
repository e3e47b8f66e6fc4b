// The tuner's results in use: a tuning database (tune/database.h) opened for
// this machine, written by `tessel tune` and read by compile, run and bench
// (--tuning-db).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tessel/driver/compiler.h"
#include "tessel/driver/options.h"
#include "tessel/driver/tuner.h"

namespace tessel {

// <cache dir>/tuning.db ("" when there is no cache folder).
std::string default_tuning_db_path();

// The fingerprint of this CPU and thread count that records are keyed by.
std::string host_cpu_fingerprint(int threads);

// The fingerprint of device 0 (tune/fingerprint.h: GPU name, cubin
// architecture, driver version, multiprocessors) that GPU records are keyed
// by; "" without a usable GPU.
std::string host_cuda_fingerprint();

// The records a compile for `target` uses: host_cuda_fingerprint() for
// Target::Cuda, else host_cpu_fingerprint(threads).
std::string host_fingerprint(Target target, int threads);

// Records each tuned kernel's best schedule (improved or not: a default that
// won is worth knowing too) under `fingerprint`: host_cpu_fingerprint() for
// the CPU tuner, host_cuda_fingerprint() (driver/cuda_compiler.h) for the GPU's.
class TuningRecorder {
 public:
  TuningRecorder(std::string path, std::string fingerprint);
  void record(const KernelTuning& k);

 private:
  std::string path_, fingerprint_;
};

// A lookup of the records of `fingerprint` and this version in the database
// at `path`, by kernel hash and kind (a record of another kind under the
// same hash is another kernel: not used, with a warning). The file is read
// once. A missing file or an empty fingerprint (no device to match records
// with) gives none, with a warning on `log` (stderr when null; it must
// outlive the lookup); a record whose schedule does not parse is skipped
// with a warning.
ScheduleLookup tuning_db_lookup(const std::string& path, const std::string& fingerprint, std::ostream* log);

// A hash of the records `tuning_db_lookup` would use, for the whole-model
// cache key ("none" when there is no database).
std::string tuning_db_digest(const std::string& path, const std::string& fingerprint);

}  // namespace tessel
