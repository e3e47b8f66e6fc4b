// tessel ceilings [--target cpu] [--threads T] [--refresh] [--json]: the
// machine's measured ceilings (driver/host_ceilings.h), from the cache when
// it has them for this machine and thread count.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "tessel/driver/ceilings_json.h"
#include "tessel/driver/host_ceilings.h"
#include "tessel/support/error.h"
#include "tessel/tools/commands.h"

namespace tessel::cli {

namespace {

std::string cell(double v, int decimals, int width) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%*.*f", width, decimals, v);
  return buf;
}

// 32 KiB, 1 MiB.
std::string size_text(int64_t bytes) {
  return bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

void print_table(const LoadedCeilings& l) {
  const CpuCeilings& c = l.ceilings;
  std::cout << "ceilings of this machine (" << c.isa << " kernels, " << c.lanes << " f32 lanes; measured "
            << c.measured_at << " at load average " << cell(c.load_average, 2, 0) << "; "
            << (l.cached ? "cached in " : "saved to ") << (l.path.empty() ? "no cache" : l.path) << ")\n";
  std::cout << "threads  FMA GFLOP/s";
  for (const MemoryLevel& lv : c.sets.front().levels) std::cout << "  " << lv.name << " GB/s";
  std::cout << "  launch us\n";
  for (const CeilingSet& s : c.sets) {
    std::cout << cell(s.threads, 0, 7) << cell(s.fma_flops_per_s / 1e9, 1, 13);
    // Under "  NAME GB/s"; "-" where this thread count has no such level (an
    // LLC no larger than the threads' L2s is not measured apart).
    for (const MemoryLevel& col : c.sets.front().levels) {
      const auto lv =
          std::find_if(s.levels.begin(), s.levels.end(), [&](const MemoryLevel& l) { return l.name == col.name; });
      const int width = int(col.name.size()) + 7;
      std::cout << (lv == s.levels.end() ? std::string(size_t(width) - 1, ' ') + "-"
                                         : cell(lv->read_bytes_per_s / 1e9, 1, width));
    }
    std::cout << cell(s.launch_s * 1e6, 2, 11) << "\n";
  }
  if (c.sets.size() > 1) {
    // Cores of their own give about threads x one thread's peak; SMT siblings, or a host that runs
    // something else on one of this VM's vCPUs (invisible from inside), give less.
    const double scale = c.sets.back().fma_flops_per_s / c.sets.front().fma_flops_per_s;
    std::cout << c.sets.back().threads << " threads reach " << cell(scale, 2, 0) << "x one thread's FMA peak";
    if (scale < 0.75 * c.sets.back().threads)
      std::cout << " (under " << c.sets.back().threads << "x: they share FMA units, or the host ran something else "
                << "on a core; --refresh to tell)";
    std::cout << "\n";
  }
  if (c.disturbed_samples > 0)
    std::cout << "warning: other processes disturbed " << c.disturbed_samples
              << " samples (their figures are low): tessel ceilings --refresh when the machine is quiet\n";
  std::cout << "a step's bytes are read at the fastest level that holds them (" << c.sets.back().threads
            << " threads):";
  for (const MemoryLevel& lv : c.sets.back().levels)
    std::cout << (&lv == &c.sets.back().levels.front() ? " " : ", ") << lv.name
              << (lv.capacity > 0 ? " up to " + size_text(lv.capacity) : " beyond");
  std::cout << "\n";
}

}  // namespace

int cmd_ceilings(const CeilingsArgs& a, const CommonArgs& c) {
  TS_CHECK(c.target != "cuda",
           "--target cuda: GPU ceilings are not measured yet (docs/roofline.md); use --target cpu");
  TS_CHECK(c.target == "cpu", "tessel ceilings: --target must be cpu or cuda, got '", c.target, "'");
  TS_CHECK(c.threads >= 0, "--threads must be >= 0 (0 = all cores), got ", c.threads);
  const LoadedCeilings l = host_ceilings(c.threads, a.refresh, std::cerr);
  if (c.json) {
    Json j = ceilings_to_json(l.ceilings);
    j["cached"] = l.cached;
    j["cache_file"] = l.path;
    std::cout << json_line(j) << "\n";
  } else {
    print_table(l);
  }
  return 0;
}

}  // namespace tessel::cli
