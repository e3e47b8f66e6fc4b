// The tuner's results in use: a tuning database (tune/database.h) opened for
// this machine, written by `tessel tune` and read by compile, run and bench
// (--tuning-db).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tessel/driver/compiler.h"
#include "tessel/driver/tuner.h"

namespace tessel {

// <cache dir>/tuning.db ("" when there is no cache folder).
std::string default_tuning_db_path();

// The fingerprint of this CPU and thread count that records are keyed by.
std::string host_cpu_fingerprint(int threads);

// Records each tuned kernel's best schedule (improved or not: a default that
// won is worth knowing too) under this machine's fingerprint.
class TuningRecorder {
 public:
  TuningRecorder(std::string path, int threads);
  void record(const KernelTuning& k);

 private:
  std::string path_, fingerprint_;
};

// A lookup of the records for this machine in the database at `path`; a
// missing file gives none (a warning on `log`), a record whose schedule does
// not parse is skipped with a warning.
ScheduleLookup tuning_db_lookup(const std::string& path, int threads, std::ostream* log);

// A hash of the records `tuning_db_lookup` would use, for the whole-model
// cache key ("" when there is no database or no record).
std::string tuning_db_digest(const std::string& path, int threads);

}  // namespace tessel
