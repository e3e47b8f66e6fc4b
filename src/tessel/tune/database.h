// The tuning database: the fastest schedule the autotuner measured for each
// kernel on each machine, kept across runs in one text file that several
// tuning processes may share.
//
// A record is keyed by (kernel hash, hardware fingerprint, tessel version).
// lookup() sees only this build's version and the fingerprint asked for;
// records of other versions and other machines are left alone, and kept
// when the file is rewritten, so one file can serve a fleet and survive an
// upgrade and a downgrade.
//
// Callers pass the path. The default is <cache dir>/tuning.db, with
// cache_dir() of driver/options.h (TESSEL_CACHE_DIR, else ~/.cache/tessel).
//
// File format, text, one record a line:
//
//   tessel-tuning-db 1
//   HASH \t FINGERPRINT \t VERSION \t TIME_US \t TRIALS \t NAME \t SCHEDULE \t CHECK
//
// Fields escape backslash, tab, newline and carriage return with a backslash
// (the schedule text is multi-line); CHECK is fast_hash64 of the line up to
// it, in hex. A line that is cut short, edited, absurd (a time that is not
// positive and finite, a line over 1 MiB) or not newline-terminated is
// dropped, never trusted; a file with another header is dropped whole. Each
// read that drops something says so in one warning line on stderr
// ("warning: tuning db PATH: ..."); the next record() rewrites the file
// without it.
//
// Concurrency: record() holds an exclusive flock on PATH.lock while it
// re-reads the file, merges and writes it by temporary file and rename, so
// concurrent tuners lose no record and readers, which take no lock, see a
// whole file. Each record() rewrites the whole file: fine for records that
// each cost seconds of measuring.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tessel {

struct TuningRecord {
  std::string kernel_hash;  // canonical hash of what the kernel computes
  std::string fingerprint;  // HardwareFingerprint::str()
  std::string version;      // tessel version that measured it (record() stamps its database's)
  std::string schedule;     // print_schedule() text, stored opaquely
  double time_us = 0;       // measured time of one run
  std::string kernel_name;  // informational
  int64_t trials = 0;       // candidates measured to find it
  bool operator==(const TuningRecord&) const = default;
};

class TuningDatabase {
 public:
  // Reads `path`; a missing file is an empty database. Damaged content is
  // dropped with a warning, never an error. `version` is the tessel version
  // whose records lookup() sees and record() writes; empty means this
  // build's (the project version, as `tessel --version` prints).
  static TuningDatabase open(const std::string& path, const std::string& version = "");

  // The record of `kernel_hash` on `fingerprint` for this version.
  std::optional<TuningRecord> lookup(const std::string& kernel_hash, const std::string& fingerprint) const;

  // Stores `rec` with this database's version unless the file already holds
  // one for the same kernel, fingerprint and version that is at least as
  // fast. Re-reads the file under the lock first, so afterwards this object
  // also sees what other processes recorded. Throws tessel::Error when the
  // record is malformed (empty key, time not positive) or the file cannot be
  // written.
  void record(const TuningRecord& rec);

  const std::string& path() const { return path_; }
  const std::string& version() const { return version_; }
  size_t size() const { return records_.size(); }  // all versions and machines
  // Every record, all versions and machines, in key order.
  std::vector<TuningRecord> records() const;
  // Of size(), the records of other tessel versions, which lookup() ignores.
  size_t other_version_count() const;
  // Lines the last read dropped as damaged (0 or 1 for a bad header: the file).
  size_t damaged_count() const { return damaged_; }

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // hash, fingerprint, version
  void load();

  std::string path_, version_;
  std::map<Key, TuningRecord> records_;
  size_t damaged_ = 0;
};

}  // namespace tessel
