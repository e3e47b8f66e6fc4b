// Loading CUDA artifacts (`tessel compile MODEL --target cuda -o FILE`) with
// the runtime alone: no NVRTC, no compiler. The artifact holds a cubin per
// GPU architecture and each distinct kernel's launch record; the loader
// picks the cubin this GPU runs (cuModuleLoadData through the driver API),
// rebuilds the launch geometry from its loop IR expressions, and hands the
// steps to a GpuExecutable. driver/artifact.h makes such artifacts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/runtime/artifact_format.h"
#include "tessel/runtime/cuda/gpu_executable.h"

namespace tessel {

// A kernel's launch record, and back (the expressions through the loop IR
// text form; `syms` are the kernel's, which the expressions may use).
// kernel_launch throws "corrupt artifact (...)" for text that does not parse.
ArtifactLaunch artifact_launch(const cuda::KernelSource& k, const std::vector<std::string>& syms);
cuda::KernelSource kernel_launch(const ArtifactLaunch& l);

// The cubin a GPU of architecture `device_arch` ("sm_90a", as
// cuda::device_arch() says) runs: the one compiled for its version (any
// suffix: sm_90 or sm_90a on sm_90a, sm_100a on sm_100), else one for the same
// major version and a lower minor without the arch-specific "a" suffix
// (binary compatibility). tessel::Error naming both sides when none.
const ArtifactCubin& pick_cubin(const std::vector<ArtifactCubin>& cubins, const std::string& device_arch);

// An executable on device 0 from a CUDA artifact (a CPU one is refused).
// Needs a GPU and its driver; throws one tessel::Error otherwise.
std::unique_ptr<GpuExecutable> load_cuda_artifact(const std::string& path, const GpuExecutableOptions& o = {});
// The same from contents already read (read_artifact): the loaded model
// borrows its weights from `a.storage`, which it keeps alive.
std::unique_ptr<GpuExecutable> load_cuda_artifact(const ArtifactContents& a, const GpuExecutableOptions& o = {},
                                                  const std::string& source_path = "");

}  // namespace tessel
