// Compiled artifacts: `tessel compile MODEL -o FILE` writes one; `run`,
// `bench`, `inspect` and tessel::compile() load it without compiling again
// (runtime/artifact_loader.h reads and loads them without the compiler).
//
// An artifact holds the model after the pass pipeline (its text IR, large
// constants as raw bytes beside it), the executable's steps (which nodes each kernel
// computes, its params by value name, symbols, parallel extent, assertion
// messages), the kernels' object file and the CPU it was compiled for, or
// for --target cuda a cubin per GPU architecture with each kernel's launch
// record (runtime/artifact_format.h has the byte layout;
// runtime/cuda/gpu_artifact.h loads those). Compiled without --dim it
// stays symbolic, so it runs at every binding: kernels take the symbols'
// values at run time.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tessel/driver/compiler.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/options.h"
#include "tessel/runtime/artifact_format.h"
#include "tessel/runtime/artifact_loader.h"
#include "tessel/runtime/executable.h"

namespace tessel {

// The contents of an artifact for `c`, compiled (compile_for_cpu) from `m`.
// Its constants are views of `m`'s tensors: `m` must outlive the contents.
ArtifactContents make_artifact(const Model& m, const CompiledModel& c);
// The same for a compile whose executable was moved out of `c` (OwnedCpuCompile).
ArtifactContents make_artifact(const Model& m, const CompiledModel& c, const Executable& exe);

// The contents of a CUDA artifact for `m` (after the pass pipeline) from one
// compile per GPU architecture (compile_cuda_kernels; no GPU needed). The
// compiles must agree on the kernel plan (they do: only the code and the
// launches depend on the architecture); tessel::Error otherwise.
ArtifactContents make_cuda_artifact(const Model& m, const std::vector<const CudaCompiledModel*>& compiles);

// Writes `bytes` to `path` atomically: a temporary file in the same folder,
// renamed into place, so that `path` is never a partial file.
void write_file_atomically(const std::string& path, std::string_view bytes);

// load_artifact (runtime/artifact_loader.h) with the driver's threads and
// memory planning.
std::unique_ptr<Executable> load_artifact(const std::string& path, const DriverOptions& o);

}  // namespace tessel
