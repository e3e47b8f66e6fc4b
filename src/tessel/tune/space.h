// The search space of one kernel: the schedules a tuner may try, derived
// from the kernel's kind and sizes and from the target (vector width,
// registers, caches), never from the model it came from.
//
//   gemm, conv_gemm   register tiles that fit the vector registers (MR x NR
//                     accumulators + NR/L B vectors + a broadcast) with at
//                     least 8 independent FMA chains, for each vector width
//                     the target has; cache blocks KC (the B micro-panel in
//                     L1), MC (the packed A block in L2), NC (the packed B
//                     block, within the 1 MiB stack cap); the parallel
//                     decomposition (M blocks or M x N tiles); A packed or
//                     read in place; a prepacked B read in place where the
//                     tile reads whole panels, else packed.
//   nest              the innermost loop's vector width; the parallel loop
//                     on or off (a small kernel may not pay for a fork).
//   depthwise         output rows per register block (1-4), the widest
//                     vector of a row (8 lanes up to the target's), the
//                     parallel loop on or off.
//
// Other kinds get only their default here; the GPU kinds' spaces are in
// tune/gpu_space.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/loop/ir.h"
#include "tessel/schedule/cpu_info.h"
#include "tessel/schedule/schedule.h"

namespace tessel {

// What the space and the cost model know of a kernel.
struct KernelFacts {
  std::string kind;                            // LoweredGroup::schedule
  int64_t m = -1, n = -1, k = -1, batch = 1;   // GEMM kinds (-1: symbolic)
  int64_t b_panel_width = 0, b_panel_columns = 0;  // B prepacked in panels (schedule/gemm.h), else 0
  // conv_gemm: the orientation m and n are for ("channels" or "positions",
  // the kernel's conv.gemm rows); a candidate of the other swaps them.
  std::string conv_rows;
  int64_t out_elements = 0;                    // output tensor elements
  int64_t bytes = 0;                           // bytes of every param (read or written once)
  int64_t parallel_units = 0;                  // iterations of the parallel loop (0: none)
  bool gpu_row_blocks = false;                 // gpu: rows go to blocks with gpu.lanes loops (tune/gpu_space.h)
  loop::Stmt gpu_contract;                     // gpu_mma: its Contract statement (tune/gpu_space.h)
};

// Every candidate, the default first; each passes check_schedule.
std::vector<Schedule> search_space(const Schedule& default_schedule, const KernelFacts& f, const CpuInfo& cpu);

// Neighbours of `s` in the space: the schedules that differ from it in one
// or two knob values (a register tile is two; the mutation of an
// evolutionary search).
std::vector<Schedule> neighbours(const Schedule& s, const std::vector<Schedule>& space);

}  // namespace tessel
