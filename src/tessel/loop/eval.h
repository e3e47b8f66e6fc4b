// A slow, exact interpreter of the loop IR: the oracle that loop passes and
// code generators are tested against without LLVM.
//
// It follows the calling convention of ir.h: `buffers` holds one pointer per
// Kernel::params entry (dense row-major memory of the param's dtype; f16/bf16
// as 16-bit patterns, bool as bytes), `syms` the values of Kernel::syms.
// Returns 0, or 1 + the pre-order index of the first Assert that failed.
// Operator semantics are scalar.h's. In addition, as an oracle should, it
// throws tessel::Error on what generated code leaves undefined: an index out
// of its buffer's bounds, integer division by zero, an out-of-range shift.
// Select evaluates both arms (vector code does), so both must be safe.
// Parallel loops run fully and in order; vectorized/unrolled loops serially.
// Allocated buffers start zeroed. A Contract sums over k in ascending order,
// in f32, for one output element after another (batch, i, j row-major).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessel/loop/ir.h"

namespace tessel::loop {

int32_t run_kernel(const Kernel& k, std::vector<void*> buffers, std::vector<int64_t> syms);

// Runs only the iterations [begin, end) of the kernel's top-level Parallel
// loop, counted from 0 (the loop variable takes min + iteration), as one
// runtime task would; without a Parallel loop it runs the whole kernel.
int32_t run_kernel_range(const Kernel& k, const std::vector<void*>& buffers, const std::vector<int64_t>& syms,
                         int64_t begin, int64_t end);

// Evaluates an i64 expression over named i64 values (e.g. a buffer shape or
// a loop extent over the syms). Throws on loads and unknown variables.
int64_t eval_index(const Expr& e, const std::map<std::string, int64_t>& values);

}  // namespace tessel::loop
