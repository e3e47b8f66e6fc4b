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

// The whole model timed with and without a tuning run's schedules (CPU):
// each kernel is tuned alone, back to back on its own inputs, and a set of
// winners can still make the model slower (caches colder between kernels
// than between repeats of one). `before` is what a compile used until now
// (`base`: the database's records, none when empty); `tuned` adds the
// run's improved kernels over it.
struct WholeModelCheck {
  bool ran = false;   // false: no kernel improved, nothing to confirm
  double before_ms = 0, tuned_ms = 0;
  int runs = 0;       // timed runs of each, in alternating rounds
  bool keep = true;   // the tuned model is no slower than before
};
// Compiles `m` (after the pass pipeline) both ways and times them in five
// alternating rounds after a warm-up, about `seconds` in all; medians.
// `tolerance`: kept when tuned_ms <= before_ms * (1 + tolerance).
WholeModelCheck check_on_whole_model(const Model& m, const std::vector<RtValue>& inputs, const DriverOptions& o,
                                     const ScheduleLookup& base, const std::vector<KernelTuning>& kernels,
                                     double seconds = 4, double tolerance = 0);

// Which of a run's improved kernels to record (CPU): all of them when the
// whole model with them is no slower; otherwise the largest prefix, with
// the kernels ordered by their estimated saving ((default - best) x uses),
// that is no slower, found by halving (a few checks, each about `seconds`);
// none when no prefix is. `check` is the chosen set's check (the full set's
// when none is kept), `checks` how many ran.
struct RecordChoice {
  std::vector<std::string> kept;  // default hashes of the improved kernels to record
  size_t improved = 0;            // improved kernels in the run
  WholeModelCheck check;
  int checks = 0;
};
RecordChoice choose_records_on_whole_model(const Model& m, const std::vector<RtValue>& inputs, const DriverOptions& o,
                                           const ScheduleLookup& base, const std::vector<KernelTuning>& kernels,
                                           double seconds = 4, double tolerance = 0);

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
