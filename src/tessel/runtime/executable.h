// An Executable: a model's graph cut into steps — compiled kernels and, for
// nodes without a compiled form, single nodes run by the reference
// interpreter — plus the thread pool the kernels' parallel loops use and the
// memory plans (one per symbol binding) that place the kernels' intermediate
// tensors in one arena per run.
//
// run() is const and keeps all per-run state (values, arena) on its own
// frame, so one Executable may be run from several threads at once; the
// results are bitwise identical to a single-threaded run because every kernel
// splits its parallel loop over output rows only (no cross-thread reductions).
//
// The runtime does not need the compiler: a step refers to a kernel by its
// function pointer, and `code` keeps the code those pointers live in alive.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/ops/registry.h"
#include "tessel/runtime/memory_plan.h"
#include "tessel/runtime/step.h"
#include "tessel/runtime/thread_pool.h"

namespace tessel {

// Wall time of each step of one run (seconds, indexed like steps()), filled
// when a RunProfile is passed to run(); timing adds two clock reads per step.
struct RunProfile {
  std::vector<double> step_seconds;
};

struct ExecutableOptions {
  int threads = 0;              // <= 0: ThreadPool::default_threads()
  bool memory_planning = true;  // false: every kernel output is its own allocation
};

class Executable {
 public:
  // `model` must outlive the Executable (or be handed to retain()).
  Executable(const Model& model, std::vector<Step> steps, std::shared_ptr<const void> code,
             const ExecutableOptions& o = {});

  // Inputs in graph input order; outputs in graph output order. Checks the
  // inputs against the declared types and binds the symbols from their shapes.
  std::vector<RtValue> run(const std::vector<RtValue>& inputs, RunProfile* profile = nullptr) const;
  // The same for models whose inputs and outputs are all tensors.
  std::vector<Tensor> run_tensors(const std::vector<Tensor>& inputs) const;

  const Model& model() const { return model_; }
  const std::vector<Step>& steps() const { return steps_; }
  int threads() const { return pool_->threads(); }
  bool memory_planning() const { return memory_planning_; }
  // Operators run by the interpreter (sorted, unique; domain-qualified when not ai.onnx).
  std::vector<std::string> interpreter_ops() const;
  // The plan for these bindings (computed once per binding, then cached).
  std::shared_ptr<const MemoryPlan> memory_plan(const std::map<std::string, int64_t>& bindings) const;
  // Keeps `owner` alive as long as the executable: the model it runs, the
  // code its kernels live in, whatever else they borrow from.
  void retain(std::shared_ptr<const void> owner) { retained_.push_back(std::move(owner)); }

 private:
  struct RunState;
  void run_kernel(const KernelStep& k, RunState& st) const;
  void run_interp(const Node& n, RunState& st) const;
  size_t slot(const Value* v) const;

  const Model& model_;
  std::vector<Step> steps_;
  std::shared_ptr<const void> code_;
  std::unique_ptr<ThreadPool> pool_;
  bool memory_planning_ = true;
  std::map<const Value*, size_t> slots_;            // value -> index into the per-run value table
  std::vector<std::vector<size_t>> free_after_;     // per step: slots whose last reader it is
  std::vector<std::shared_ptr<const void>> retained_;
  mutable std::mutex plans_mu_;
  mutable std::map<std::map<std::string, int64_t>, std::shared_ptr<const MemoryPlan>> plans_;
};

}  // namespace tessel
