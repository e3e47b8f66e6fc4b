// What `run` and `bench` share: load the model, read the inputs, bind the
// symbols, and either compile it through the public API (target cpu), for the
// GPU (target cuda), or keep it for the interpreter (target reference).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/options.h"
#include "tessel/driver/api.h"

namespace tessel::cli {

struct PreparedModel {
  std::unique_ptr<Model> model;     // targets reference and cuda: the model after the pass pipeline
  std::unique_ptr<Executable> exe;  // target cpu (owns its model)
  std::unique_ptr<CudaCompiledModel> gpu;  // target cuda (runs `model`)
  std::unique_ptr<GpuExecutable> gpu_artifact;  // target cuda, from a CUDA artifact (owns its model)
  std::vector<RtValue> inputs;      // in graph input order
  double load_ms = 0;               // reading the model file
  double compile_ms = 0;            // pass pipeline (and code generation, target cpu)
  const Graph& graph() const;
  // Target cuda: the executable (compiled or loaded), else null.
  const GpuExecutable* gpu_exe() const { return gpu ? gpu->exe.get() : gpu_artifact.get(); }
  // Interpreter-run operators of the compiled targets (empty: fully compiled).
  std::vector<std::string> interpreter_ops() const;
  // `profile` (target cpu only) receives each step's time.
  std::vector<RtValue> run(RunProfile* profile = nullptr) const;
};

// `input_specs`: NAME=FILE.npy. Notes (random inputs, default symbols) go to stderr.
PreparedModel prepare_model(const std::string& path, const std::vector<std::string>& input_specs,
                            const DriverOptions& o);

}  // namespace tessel::cli
