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
//   - gpu.lanes loops (ir.h; CUDA only): inside a gpu.thread.x loop of
//     constant extent T, not nested in another lanes loop. A lanes reduction
//     (lanes_reduction_update below) needs T a multiple of 32 up to 1024, no
//     gpu.thread.y/z loops unless T is 32, and must be reached by all the
//     threads of a block (of a warp when T is 32): no enclosing if or loop
//     whose condition or bounds may differ between them (they do when they
//     mention the thread or a lanes variable, or load a local buffer or an
//     output), nor its own bounds; in such a kernel asserts are likewise
//     outside lanes loops and the same for all threads. Other lanes loops
//     store only to buffers allocated inside them, to params at an index
//     that mentions the lanes variable, and to element v of a rank-1 local
//     buffer of E elements when the loop is `for v in [0, E)` (a row cache);
//     no param they store to is loaded anywhere in the kernel;
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

// The update of a gpu.lanes loop that is a block-wide reduction: its body is
// one store `acc[c] = op(acc[c], e)` (or `op(e, acc[c])`), possibly under
// lets and serial/unrolled/vectorized loops, with acc a Local buffer, c
// constants, op one of + * min max & | ^, and neither e nor the lets and
// loop bounds around it reading acc. nullptr for any other body. *operand
// (when given) receives e.
const StmtNode* lanes_reduction_update(const StmtNode& lanes_loop, Expr* operand = nullptr);

// Whether `b[index]` inside gpu.lanes loop `lanes` is element v of a rank-1
// local buffer of E elements with the loop `for v in [0, E)` (a row cache,
// schedule/gpu_row_cache.cpp): each iteration has its own element, and the
// block's threads, which take the same iterations in every lanes loop of a
// row, touch only their own. Such a loop may store there; the CUDA emitter
// keeps a buffer accessed only so in registers.
bool lane_element(const StmtNode& lanes, const Buffer& b, const std::vector<Expr>& index);

}  // namespace tessel::loop
