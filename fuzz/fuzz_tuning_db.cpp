// libFuzzer target for the tuning-database reader (tune/database.h): any
// file must load, damaged lines dropped with a warning, never a crash or an
// exception. Each input is read twice: as it is (checksums mostly fail) and
// resealed (each line's checksum recomputed, so mutations reach the field
// parser). After the resealed read, one record() rewrites the file, which
// must read back as the same records plus the new one, with nothing damaged.
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "fuzz_check.h"
#include "tessel/support/error.h"
#include "tessel/support/fast_hash.h"
#include "tessel/tune/database.h"

namespace {

const std::string& scratch_path() {
  static const std::string path = [] {
    const char* shm = "/dev/shm";
    std::string dir = (access(shm, W_OK) == 0 ? std::string(shm) : std::string("/tmp")) + "/tessel-fuzz-db-XXXXXX";
    if (!mkdtemp(dir.data())) std::abort();
    return dir + "/tuning.db";
  }();
  return path;
}

void write(const std::string& text) {
  std::ofstream(scratch_path(), std::ios::binary | std::ios::trunc) << text;
}

// Each line after the header with its last tab-separated field replaced by
// the checksum of what comes before it (the database's own rule).
std::string reseal(std::string_view text) {
  std::string out;
  size_t line_no = 0;
  for (size_t at = 0; at < text.size(); ++line_no) {
    size_t nl = text.find('\n', at);
    const bool last = nl == std::string_view::npos;
    std::string_view line = text.substr(at, last ? std::string_view::npos : nl - at);
    const size_t tab = line.rfind('\t');
    if (line_no > 0 && tab != std::string_view::npos) {
      char sum[17];
      std::snprintf(sum, sizeof sum, "%016" PRIx64, tessel::fast_hash64(line.substr(0, tab)));
      out.append(line.substr(0, tab + 1)).append(sum);
    } else {
      out.append(line);
    }
    if (last) break;
    out += '\n';
    at = nl + 1;
  }
  return out;
}

std::string describe(const std::vector<tessel::TuningRecord>& rs) {
  std::string s;
  for (const auto& r : rs) {
    char time[32];
    std::snprintf(time, sizeof time, "%.17g", r.time_us);
    s += r.kernel_hash + " | " + r.fingerprint + " | " + r.version + " | " + time + " | " + std::to_string(r.trials) +
         " | " + r.kernel_name + " | " + r.schedule + "\n";
  }
  return s;
}

void read_back(const std::string& text) {
  const std::string version = "fuzz";
  write(text);
  const tessel::TuningDatabase db = tessel::TuningDatabase::open(scratch_path(), version);
  std::vector<tessel::TuningRecord> expected = db.records();
  tessel::TuningRecord fresh;
  fresh.kernel_hash = "fuzz-round-trip";
  fresh.fingerprint = "fp";
  fresh.version = version;
  fresh.schedule = "schedule nest {\n}\n";
  fresh.time_us = 1;
  for (const auto& r : expected)
    if (std::tie(r.kernel_hash, r.fingerprint, r.version) == std::tie(fresh.kernel_hash, fresh.fingerprint, version))
      return;  // the record would not be written
  tessel::TuningDatabase writer = db;
  writer.record(fresh);
  expected.push_back(fresh);
  std::sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) {
    return std::tie(a.kernel_hash, a.fingerprint, a.version) < std::tie(b.kernel_hash, b.fingerprint, b.version);
  });
  const tessel::TuningDatabase again = tessel::TuningDatabase::open(scratch_path(), version);
  std::string after = describe(again.records());
  if (again.damaged_count() != 0) after += "(damaged lines on reading back)\n";
  tessel::fuzz::check_round_trip("tuning database", describe(expected), after);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  write(std::string(text));
  (void)tessel::TuningDatabase::open(scratch_path(), "fuzz");
  read_back(reseal(text));
  return 0;
}
