#include "tessel/tune/fingerprint.h"

#include <cinttypes>
#include <cstdio>

#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/support/fast_hash.h"

namespace tessel {

std::string HardwareFingerprint::str() const {
  std::string f = features;
  if (f.size() > 64) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "f:%016" PRIx64, fast_hash64(features));
    f = buf;
  }
  return target + "|" + device + "|" + f + "|" + driver + "|t" + std::to_string(threads);
}

HardwareFingerprint cpu_fingerprint(const std::string& cpu_name, const std::string& llvm_features, int threads) {
  return {"cpu", cpu_name, llvm_features, "", threads};
}

HardwareFingerprint cuda_fingerprint(const cuda::DeviceInfo& d, const std::string& arch) {
  const std::string driver = std::to_string(d.driver_version / 1000) + "." + std::to_string(d.driver_version % 1000 / 10);
  return {"cuda", d.name, arch, driver, d.multiprocessors};
}

}  // namespace tessel
