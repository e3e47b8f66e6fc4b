#include "tessel/schedule/cpu_info.h"

#include <algorithm>
#include <thread>
#include <vector>

#include <unistd.h>

#include "tessel/support/strings.h"

namespace tessel {

namespace {

// True when the comma-separated feature list enables `name` ("+name").
bool enabled(const std::string& features, const std::string& name) {
  const std::vector<std::string> fields = split(features, ',');
  return std::find(fields.begin(), fields.end(), "+" + name) != fields.end();
}

// sysconf's answer when it has one (it reports 0 or -1 on some kernels and VMs).
int64_t sysconf_or(int name, int64_t fallback) {
  const long v = sysconf(name);
  return v > 0 ? v : fallback;
}

}  // namespace

CpuInfo cpu_info_from_features(const std::string& llvm_features) {
  CpuInfo info;
  if (enabled(llvm_features, "avx512f")) {
    info.vector_lanes_f32 = 16;
    info.vector_registers = 32;
  } else if (enabled(llvm_features, "avx")) {
    info.vector_lanes_f32 = 8;
  }
  info.has_fma = enabled(llvm_features, "fma") || enabled(llvm_features, "avx512f");
  return info;
}

CpuInfo host_cpu_info(const std::string& host_llvm_features) {
  CpuInfo info = cpu_info_from_features(host_llvm_features);
  info.l1d_bytes = sysconf_or(_SC_LEVEL1_DCACHE_SIZE, info.l1d_bytes);
  info.l2_bytes = sysconf_or(_SC_LEVEL2_CACHE_SIZE, info.l2_bytes);
  info.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return info;
}

}  // namespace tessel
