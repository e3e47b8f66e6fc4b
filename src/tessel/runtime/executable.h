// An Executable: a model's graph cut into steps — compiled kernels and, for
// nodes without a compiled form, single nodes run by the reference
// interpreter — plus the thread pool the kernels' parallel loops use.
//
// run() is const and keeps all per-run state on its own frame, so one
// Executable may be run from several threads at once; the results are
// bitwise identical to a single-threaded run because every kernel splits its
// parallel loop over output rows only (no cross-thread reductions).
//
// The runtime does not need the compiler: a step refers to a kernel by its
// function pointer, and `code` keeps the code those pointers live in alive.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/ops/registry.h"
#include "tessel/runtime/thread_pool.h"

namespace tessel {

// int32_t kernel(void* const* buffers, const int64_t* syms, int64_t begin, int64_t end), see loop/ir.h.
using KernelEntry = int32_t (*)(void* const*, const int64_t*, int64_t, int64_t);

struct KernelStep {
  std::string name;
  KernelEntry fn = nullptr;
  std::vector<const Value*> params;  // inputs, then the output
  size_t num_inputs = 0;
  std::vector<std::string> syms;     // symbol values passed to the kernel, in order
  bool parallel = false;             // has a top-level parallel loop of `parallel_extent` iterations
  Dim parallel_extent;
  std::vector<std::string> assert_messages;
  std::vector<const Node*> nodes;    // the graph nodes the kernel computes
};

struct Step {
  // Exactly one is set: a compiled kernel, or a node for the interpreter.
  std::shared_ptr<KernelStep> kernel;
  const Node* interp = nullptr;
};

class Executable {
 public:
  // `model` must outlive the Executable. threads <= 0: ThreadPool::default_threads().
  Executable(const Model& model, std::vector<Step> steps, std::shared_ptr<const void> code, int threads);

  // Inputs in graph input order; outputs in graph output order. Checks the
  // inputs against the declared types and binds the symbols from their shapes.
  std::vector<RtValue> run(const std::vector<RtValue>& inputs) const;

  const Model& model() const { return model_; }
  const std::vector<Step>& steps() const { return steps_; }
  int threads() const { return pool_->threads(); }
  // Operators run by the interpreter (sorted, unique; domain-qualified when not ai.onnx).
  std::vector<std::string> interpreter_ops() const;

 private:
  void run_kernel(const KernelStep& k, std::vector<RtValue>& values, std::map<std::string, int64_t>& bindings) const;
  size_t slot(const Value* v) const;

  const Model& model_;
  std::vector<Step> steps_;
  std::shared_ptr<const void> code_;
  std::unique_ptr<ThreadPool> pool_;
  std::map<const Value*, size_t> slots_;            // value -> index into the per-run value table
  std::vector<std::vector<size_t>> free_after_;     // per step: slots whose last reader it is
};

}  // namespace tessel
