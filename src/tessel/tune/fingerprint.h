// The hardware a tuned schedule was measured on. A schedule's speed belongs
// to one machine: another CPU model, feature set or thread count, another GPU
// or driver, may want another schedule, so the tuning database keys its
// records by this fingerprint's str().
//
// This stage does not link LLVM: the CPU strings come from the caller
// (cpu::host_cpu_name() and cpu::host_cpu_features() for the host, as
// schedule/cpu_info.h takes them).
#pragma once

#include <string>

namespace tessel::cuda {
struct DeviceInfo;
}

namespace tessel {

struct HardwareFingerprint {
  std::string target;    // "cpu" or "cuda"
  std::string device;    // CPU model name ("znver3") or GPU name ("NVIDIA H100 80GB HBM3")
  std::string features;  // LLVM feature string, or the cubin architecture ("sm_90a")
  std::string driver;    // the CUDA driver version ("12.4"), "" on the CPU
  int threads = 0;       // CPU threads the kernels run on; multiprocessors on a GPU

  // One line, the database key: "cpu|znver3|f:1a2b...|t16". Feature strings
  // longer than 64 characters (the host's is over a kilobyte) appear as a
  // 64-bit hash, so that records stay readable and small.
  std::string str() const;
};

HardwareFingerprint cpu_fingerprint(const std::string& cpu_name, const std::string& llvm_features, int threads);
// Pass cuda::device_info() and cuda::device_arch() for device 0.
HardwareFingerprint cuda_fingerprint(const cuda::DeviceInfo& device, const std::string& arch);

}  // namespace tessel
