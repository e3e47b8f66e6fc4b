// Checks the invariants every loop IR consumer relies on; throws
// tessel::Error naming the first violation ("loop IR verifier: kernel k: ...").
//
//   - every variable is a kernel sym, or a loop / let variable in scope, used
//     with the type it was bound with; bound names never shadow one in scope,
//     and loop variables are unique in the kernel;
//   - loads and stores name a param or a buffer allocated in scope (by
//     identity); stores never write an input param; allocated buffers are
//     Local (or Shared, CUDA only) with constant shapes; param shapes use
//     only syms;
//   - Contract statements (ir.h): i64 extents, f32 operands, `a` free of the
//     column variable and `b` of the row variable, neither reading a buffer
//     the epilogue stores to; their variables count as loop variables;
//   - Vectorized and Unrolled loops have constant extents;
//   - CPU: at most one Parallel loop, not nested in a loop or an if, with
//     bounds over syms only (the runtime splits [0, extent) into tasks); no
//     GPU-axis loops. CUDA: no Parallel loops;
//   - types: indices and loop bounds i64, operand types agree, conditions
//     bool, integer-only operators on integers, known intrinsics with float
//     operands, only types the loop IR computes with.
#pragma once

#include "tessel/loop/ir.h"

namespace tessel::loop {

enum class Target { Cpu, Cuda };

void verify(const Kernel& k, Target target = Target::Cpu);

}  // namespace tessel::loop
