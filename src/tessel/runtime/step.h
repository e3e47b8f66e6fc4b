// The steps of an Executable: compiled kernels, and single nodes for the
// reference interpreter where a node has no compiled form. The executable and
// the memory planner both walk them, so they live here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"

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
  // Every node is elementwise (FusionKind::Elementwise): output element i
  // reads input elements at i only (or broadcast ones), each before it is
  // written. The memory planner may then let the output take over the
  // storage of a same-sized input that dies here.
  bool elementwise = false;
};

struct Step {
  // Exactly one is set: a compiled kernel, or a node for the interpreter.
  std::shared_ptr<KernelStep> kernel;
  const Node* interp = nullptr;
};

// Values a step reads (for an interpreter node also those its subgraphs
// capture from outer scopes) and values it writes.
std::vector<const Value*> step_reads(const Step& s);
std::vector<const Value*> step_writes(const Step& s);

}  // namespace tessel
