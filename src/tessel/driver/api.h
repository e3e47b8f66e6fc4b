// tessel's in-process C++ API: compile a model once, run it many times.
// It is the compiler's (the CLI, the Python module and the tests use it) and
// exposes its types; what a deployed program includes is the installed C API
// (include/tessel/tessel.h) or its C++ wrapper (include/tessel/tessel.hpp),
// which load artifacts with the runtime alone (docs/deploy.md).
//
//   #include "tessel/driver/api.h"
//
//   tessel::Options o;
//   o.threads = 4;                                   // 0: every core
//   std::unique_ptr<tessel::Executable> exe = tessel::compile("model.onnx", o);
//   tessel::Tensor x(tessel::DType::F32, {1, 3, 224, 224});
//   std::vector<tessel::Tensor> y = exe->run_tensors({x});
//
// compile() takes an ONNX file, a text-IR file or a compiled artifact (from
// `tessel compile`, told apart by its magic bytes; artifacts are loaded, not
// compiled again), or a Model built in memory. Symbols without a --dim style
// binding stay symbolic: the executable then runs at any size.
//
// Executable::run is const and thread-safe: one executable may be run from
// several threads at once, each run getting results bitwise identical to a
// single-threaded run. Every error (a bad file, a bad input, a kernel
// assertion) is thrown as tessel::Error.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"              // tessel::Model, tessel::Tensor, tessel::DType
#include "tessel/runtime/executable.h"    // tessel::Executable
#include "tessel/support/error.h"         // tessel::Error

namespace tessel {

struct Options {
  // Worker threads of the executable's pool, the caller included (0: one per core).
  int threads = 0;
  // Symbol bindings (like `--dim`): the model is specialised to them before
  // compilation. Symbols left out stay symbolic.
  std::map<std::string, int64_t> dims;
  // Intermediate tensors of compiled kernels in one arena per run.
  bool memory_planning = true;
  // Tuned schedules (a database from `tessel tune`; "": the defaults).
  std::string tuning_db;
  // Schedule knobs for every kernel that takes them ("gemm.pack.b=1", as --knob).
  std::vector<std::string> knobs;
};

// Compiles the model in `path` for this CPU (or loads it, for an artifact).
std::unique_ptr<Executable> compile(const std::string& path, const Options& o = {});

// Compiles a model built in memory (GraphBuilder, or loaded by the caller).
// The pass pipeline runs on it first. The executable owns the model.
std::unique_ptr<Executable> compile(std::unique_ptr<Model> model, const Options& o = {});

}  // namespace tessel
