// This machine's ceilings (runtime/ceilings.h), measured once per hardware
// fingerprint and thread count and cached in <cache dir>/ceilings/, so that
// `tessel bench --profile` does not measure them on every run; `tessel
// ceilings --refresh` measures again.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "tessel/runtime/ceilings.h"

namespace tessel {

// The plan for this CPU: L1 and L2 from host_cpu_info (CPUID features and
// sysconf), the last-level cache from sysfs (what one core shares; sysconf's
// L3 is the whole package's on some virtual machines), else sysconf.
CeilingsPlan host_ceilings_plan(int threads);

// The key of this machine's ceilings: the tuning database's fingerprint
// (driver/tuning.h: CPU, LLVM features, threads) with the CPUID features and
// the plan's cache sizes, which a build without LLVM (CPU "unknown") has too.
std::string host_ceilings_fingerprint(int threads, const CeilingsPlan& plan);

// <cache dir>/ceilings/<hash of the fingerprint>.ceilings
std::string ceilings_cache_path(const std::string& fingerprint);

struct LoadedCeilings {
  CpuCeilings ceilings;
  bool cached = false;  // read from the file, not measured now
  std::string path;
};

// The ceilings in `path` when it holds a whole file of this format for
// `fingerprint`; else (or with `refresh`) measure(), stamped with the
// fingerprint, time and load average, written to `path`. A damaged or
// unreadable file is measured again with one warning line on `log`, never
// an error: a cache is optional.
LoadedCeilings load_or_measure_ceilings(const std::string& path, const std::string& fingerprint, bool refresh,
                                        const std::function<CpuCeilings()>& measure, std::ostream& log);

// load_or_measure_ceilings for this machine and `threads` (0: the pool's
// default), measuring with measure_cpu_ceilings(host_ceilings_plan(threads))
// and saying so on `log` first.
LoadedCeilings host_ceilings(int threads, bool refresh, std::ostream& log);

}  // namespace tessel
