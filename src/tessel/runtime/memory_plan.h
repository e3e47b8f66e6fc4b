// Memory planning: where the intermediate tensors of compiled kernels live.
//
// Once the symbols are bound, every kernel output's size is known. Each value
// that a kernel writes and only kernels read (not a graph output, not read by
// an interpreter node, whose size the bindings decide) gets an offset in one
// arena per run. A value is live from the step that writes it to the last
// step that reads it; two values whose live ranges share a step never share
// bytes. Offsets are 64-byte aligned.
//
// Packing is greedy by size (largest first, as TFLite's arena planner and
// XLA's heap simulator do): each buffer goes into the tightest gap left by
// the already-placed buffers it overlaps in time, else on top of them.
//
// In place: the output of a purely elementwise kernel (KernelStep::elementwise)
// takes over the storage of an input of the same dtype and element count that
// dies at that step. That is legal because such a kernel computes output
// element i from input element i alone and loads it before storing element i,
// and its parallel ranges split the output, so no thread reads an element
// another thread has already overwritten. Kernels with movement, reductions
// or contractions never reuse an input in place.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/runtime/step.h"

namespace tessel {

constexpr int64_t kArenaAlignment = 64;

// A buffer of `size` bytes live during steps [first, last] (inclusive).
struct BufferRequest {
  int64_t size = 0;
  size_t first = 0;
  size_t last = 0;
};

struct ArenaLayout {
  std::vector<int64_t> offsets;  // per request, multiples of kArenaAlignment
  int64_t peak = 0;              // arena bytes: max over requests of offset + size
};

// Packs the requests (see the header comment). Never overlaps two requests
// whose live ranges intersect; peak <= the sum of the aligned sizes.
ArenaLayout pack_buffers(const std::vector<BufferRequest>& requests);

struct PlannedValue {
  const Value* value = nullptr;
  int64_t offset = 0;
  int64_t bytes = 0;
  size_t first = 0, last = 0;     // live steps
  const Value* reuses = nullptr;  // the input whose storage it takes over (in place)
};

struct MemoryPlan {
  std::vector<PlannedValue> values;  // in the order their steps write them
  std::map<const Value*, int64_t> offsets;
  int64_t peak_bytes = 0;   // the arena's size
  int64_t total_bytes = 0;  // sum of the planned values' aligned sizes: one allocation each
};

// Bytes of `v` under `bindings`, or nullopt when the bindings do not decide
// them (a size an interpreter node binds during the run) or the type has no
// flat storage.
std::optional<int64_t> value_bytes(const Value* v, const std::map<std::string, int64_t>& bindings);

// Plans the arena for one binding of the symbols (those the inputs bind).
MemoryPlan plan_memory(const Graph& g, const std::vector<Step>& steps, const std::map<std::string, int64_t>& bindings);

// The text of `tessel inspect --emit plan`.
std::string print_memory_plan(const MemoryPlan& p, const std::map<std::string, int64_t>& bindings);

}  // namespace tessel
