// Lowering a fusion group for the GPU: the generic nest without
// vectorisation or the packed CPU GEMM (a GPU thread runs one output
// element), transcendentals expanded, simplified, then mapped onto GPU axes
// by schedule/gpu_schedule.h. A contraction group (f32/f16/bf16 MatMul,
// Gemm, group-1 Conv and the elementwise ops after it) becomes one Contract
// statement instead, which codegen/cuda emits as a tensor-core GEMM
// (mma_gemm.h; LoweredGroup::schedule "gpu_mma"). The result is what
// codegen/cuda takes.
#pragma once

#include "tessel/lower/lower_group.h"
#include "tessel/schedule/gpu_schedule.h"

namespace tessel {

// The NestSchedule of GPU kernels: vector width 1, no CPU GEMM but Contract
// statements (gpu_gemm); the parallel loop fuses the outer dims so that the
// GPU schedule can flatten it.
NestSchedule gpu_nest_schedule();
// ... with Attention groups as attention statements (NestSchedule::gpu_attention).
NestSchedule gpu_nest_schedule(bool attention);

// The group's kernel with the GPU nest, math expanded and simplified, before
// its mapping onto GPU axes. Throws what lower_group throws
// (LoweringUnsupported, FusionRejected), and LoweringUnsupported when an
// intrinsic has no expansion.
LoweredGroup lower_group_gpu_nest(const FusionGroup& g, const OpRegistry& reg, bool attention = false);

// lower_group_gpu_nest, then schedule_for_gpu.
LoweredGroup lower_group_for_gpu(const FusionGroup& g, const OpRegistry& reg, const GpuScheduleOptions& o = {});

}  // namespace tessel
