#include "tessel/driver/host_ceilings.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>

#include "tessel/driver/ceilings_json.h"
#include "tessel/driver/options.h"
#include "tessel/driver/tuning.h"
#include "tessel/runtime/cpu_features.h"
#include "tessel/runtime/thread_pool.h"
#include "tessel/schedule/cpu_info.h"
#include "tessel/support/cache_file.h"
#include "tessel/support/error.h"
#include "tessel/support/fast_hash.h"

namespace tessel {

namespace {

namespace fs = std::filesystem;

constexpr const char* kMagic = "TSLCEIL1";

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

// "32768K" -> 33554432; 0 when unreadable.
int64_t parse_size(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (v <= 0 || end == s.c_str()) return 0;
  const char unit = *end;
  return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : unit == 'G' ? v << 30 : v;
}

// The largest data or unified cache level of CPU 0 in sysfs, when beyond L2.
int64_t last_level_cache_bytes() {
  int best_level = 0;
  int64_t bytes = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/sys/devices/system/cpu/cpu0/cache", ec)) {
    if (e.path().filename().string().rfind("index", 0) != 0 || read_text(e.path() / "type") == "Instruction") continue;
    const int level = std::atoi(read_text(e.path() / "level").c_str());
    if (level > best_level) best_level = level, bytes = parse_size(read_text(e.path() / "size"));
  }
  if (best_level >= 3 && bytes > 0) return bytes;
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? l3 : 0;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double load_average() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : 0;
}

// The cached ceilings of `fingerprint`, or nothing (a warning on `log` when
// the file exists but cannot be used).
std::optional<CpuCeilings> read_cached(const std::string& path, const std::string& fingerprint, std::ostream& log) {
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) return std::nullopt;
  const std::optional<std::string> payload = read_cache_file(path, kMagic);
  std::string why = "damaged (not a whole ceilings file)";
  if (payload) {
    try {
      CpuCeilings c = ceilings_from_json(Json::parse(*payload));
      if (c.fingerprint == fingerprint) return c;
      return std::nullopt;  // another machine's under a colliding name: measured again, silently
    } catch (const nlohmann::json::exception&) {
      why = "not JSON";
    } catch (const Error& e) {
      why = e.what();
    }
  }
  log << "warning: ceilings cache " << path << ": " << why << "; measuring again\n";
  return std::nullopt;
}

}  // namespace

CeilingsPlan host_ceilings_plan(int threads) {
  const CpuInfo info = host_cpu_info(detected_cpu_features());
  return ceilings_plan(threads, info.l1d_bytes, info.l2_bytes, last_level_cache_bytes());
}

std::string ceilings_cache_path(const std::string& fingerprint) {
  const std::string dir = cache_dir();
  if (dir.empty()) return "";
  char name[40];
  std::snprintf(name, sizeof name, "%016" PRIx64 ".ceilings", fast_hash64(fingerprint));
  return (fs::path(dir) / "ceilings" / name).string();
}

LoadedCeilings load_or_measure_ceilings(const std::string& path, const std::string& fingerprint, bool refresh,
                                        const std::function<CpuCeilings()>& measure, std::ostream& log) {
  LoadedCeilings r;
  r.path = path;
  if (!refresh)
    if (std::optional<CpuCeilings> c = read_cached(path, fingerprint, log)) {
      r.ceilings = std::move(*c);
      r.cached = true;
      return r;
    }
  r.ceilings = measure();
  r.ceilings.fingerprint = fingerprint;
  r.ceilings.measured_at = utc_now();
  r.ceilings.load_average = load_average();
  if (!path.empty()) write_cache_file(path, kMagic, json_line(ceilings_to_json(r.ceilings)));
  return r;
}

std::string host_ceilings_fingerprint(int threads, const CeilingsPlan& plan) {
  char cpuid[24];
  std::snprintf(cpuid, sizeof cpuid, "%016" PRIx64, fast_hash64(detected_cpu_features()));
  return str_cat(host_cpu_fingerprint(threads), "|cpuid:", cpuid, "|caches:", plan.l1_bytes, ",", plan.l2_bytes, ",",
                 plan.llc_bytes);
}

LoadedCeilings host_ceilings(int threads, bool refresh, std::ostream& log) {
  if (threads <= 0) threads = ThreadPool::default_threads();
  const CeilingsPlan plan = host_ceilings_plan(threads);
  const std::string fingerprint = host_ceilings_fingerprint(threads, plan);
  return load_or_measure_ceilings(ceilings_cache_path(fingerprint), fingerprint, refresh, [&] {
    log << "note: measuring this machine's ceilings for " << threads
        << " threads (about a second, once; cached; tessel ceilings --refresh measures again)\n";
    return measure_cpu_ceilings(plan);
  }, log);
}

}  // namespace tessel
