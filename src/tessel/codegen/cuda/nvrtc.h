// CUDA C++ -> cubin (or PTX) through NVRTC, opened at run time: no link-time
// dependency on the CUDA toolkit. libnvrtc.so.13 is looked up through the
// dynamic loader, then libnvrtc.so, then the toolkit folders ($CUDA_HOME,
// $CUDA_PATH, /usr/local/cuda); TESSEL_NVRTC=PATH names the library instead.
//
// Cubins are compiled for one exact architecture (sm_90a on a Hopper H100/
// H200), so the driver never JIT-compiles PTX. Every compile passes
// --fmad=false: tessel's semantics forbid contracting a * b + c.
//
// Disk cache (when NvrtcOptions::cache_dir is set): <dir>/cuda/<key>.cubin,
// key = SHA-256 over the code generator revision, tessel version, NVRTC
// version, architecture, options and source; support/cache_file.h framing.
#pragma once

#include <string>
#include <vector>

namespace tessel::cuda {

struct NvrtcOptions {
  std::string arch = "sm_90a";  // a real architecture: sm_XY or sm_XYa
  // Folders for #include; the CUDA include folder (cuda_include_dir()) is
  // always added when it exists, for cuda_fp16.h / cuda_bf16.h.
  std::vector<std::string> include_dirs;
  std::string cache_dir;  // empty: no disk cache
  std::string program_name = "tessel_kernels.cu";
};

struct Cubin {
  std::string image;  // the cubin (ELF) bytes
  std::string log;    // NVRTC's log (warnings), empty on a cache hit
  bool from_cache = false;
};

// Whether NVRTC can be loaded; *why says what was tried when it cannot.
bool nvrtc_available(std::string* why = nullptr);
// "13.0". tessel::Error when NVRTC cannot be loaded.
std::string nvrtc_version();
// The CUDA include folder holding cuda_fp16.h, or "" when none is found.
std::string cuda_include_dir();
// The architecture to compile for on a device of compute capability major.minor:
// sm_90a for 9.0 (Hopper's arch-specific instructions), else sm_<major><minor>.
std::string arch_for_compute_capability(int major, int minor);

// tessel::Error carrying NVRTC's log when compilation fails.
Cubin compile_to_cubin(const std::string& source, const NvrtcOptions& o);
// PTX for the virtual architecture matching o.arch (compute_90a for sm_90a).
std::string compile_to_ptx(const std::string& source, const NvrtcOptions& o);

}  // namespace tessel::cuda
