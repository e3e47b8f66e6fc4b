// Lowers one fusion group (passes/fusion.h) to one loop-IR kernel.
//
// The root's output element is built from the ops' compute definitions
// (OpSchema::lower): inputs of the group are loads from parameter buffers,
// members are inlined. The loop nest follows a NestSchedule:
//
//   parallel for p in [0, prod(outer dims)) {        // outer output dims fused
//     let i0 = ..., i1 = ... (from p)                 // row-level statements:
//     <reductions that depend only on the outer dims>  //   e.g. a row's max and sum
//     for i_last ... { <per-element reductions>; out[i0, .., i_last] = value }
//   }
//
// The innermost loop is split by the vector width into a vectorized main loop
// and a scalar tail when nothing but the store sits at that level. Each
// reduction becomes an accumulator loop placed at the innermost loop level
// whose variables (or accumulators) its value mentions, so a reduction is
// computed once where it is needed and shared by identical uses.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessel/ir/dim.h"
#include "tessel/loop/ir.h"
#include "tessel/passes/fusion.h"
#include "tessel/schedule/cpu_info.h"
#include "tessel/schedule/schedule.h"

namespace tessel {

// The choices a schedule makes for a generic (non-GEMM) kernel. Data, so that
// a tuner can search them.
struct NestSchedule {
  int vector_width = 16;      // lanes of the innermost loop; 1 = no vectorisation
  bool parallel = true;       // fuse the outer dims into one parallel loop
  bool gemm = true;           // contraction groups use the packed GEMM schedule (schedule/gemm.h)
  // Contraction groups (f32, f16 or bf16 MatMul/Gemm, group-1 Conv) become
  // one loop IR Contract statement (loop/ir.h) instead, with the rest of the
  // group as its epilogue: what the GPU's tensor-core schedule takes.
  bool gpu_gemm = false;
  // A group whose root is an Attention node becomes one loop IR attention
  // statement (lower/attention_stmt.cpp), for a flash-attention kernel.
  bool gpu_attention = false;
  CpuInfo cpu = cpu_info_from_features("+avx,+avx2,+fma");  // the target, for the GEMM blocking
  // A schedule chosen for this group (by the tuner, or read from a tuning
  // database): its template knobs override the choices above and those the
  // GEMM template derives from the sizes. Its loop primitives are the
  // caller's to apply to the lowered kernel (schedule/loop_primitives.h).
  std::optional<Schedule> tuned;
};

struct LoweredGroup {
  loop::Kernel kernel;
  std::vector<const Value*> params;  // graph value per kernel param (inputs, then the output)
  // Iterations of the kernel's top-level parallel loop (nullopt: none).
  std::optional<Dim> parallel_extent;
  // The schedule that built the nest: "gemm" (packed register-blocked GEMM,
  // schedule/gemm.h), "conv_gemm" (its implicit-GEMM convolution), "contract"
  // and "conv_contract" (a Contract statement, NestSchedule::gpu_gemm) or
  // "nest" (the generic loop nest).
  std::string schedule = "nest";
  // The schedule the kernel was built with, as data: kind `schedule`, the
  // template knobs in effect (defaults or tuned), then the tuned schedule's
  // loop primitives. Lowering the group again with it as
  // NestSchedule::tuned builds the same kernel.
  Schedule sched;
  // For the GEMM kinds, the product's sizes (-1 where symbolic): what a
  // tuner's search space and cost model are built from.
  struct GemmShape {
    int64_t m = -1, n = -1, k = -1, batch = 1;
    int64_t b_panel_width = 0, b_panel_columns = 0;  // B prepacked (GemmOperands::b_panels), else 0
  } gemm_shape;
  // The hash of the kernel this group lowers to with the default schedule
  // (set by the driver: what tuning records are keyed by).
  std::string default_hash;
};

// Throws LoweringUnsupported (ops/lowering.h) naming the node that has no
// compiled form for its operands, or tessel::Error on malformed graphs.
LoweredGroup lower_group(const FusionGroup& g, const OpRegistry& reg, const NestSchedule& s = {});

// The default schedule for a group on this machine's vector width.
NestSchedule default_schedule(const FusionGroup& g);

}  // namespace tessel
