// The search space of one GPU kernel: values of its kind's template knobs
// (schedule/schedule.h knob_keys) around its default schedule, derived from
// the kind, the kernel's facts and the device, never from the model it came
// from.
//
//   gpu_mma         gpu.gemm: wgmma on/off (only where the architecture has
//                   it: sm_90a), with wgmma the warp-specialised TMA kernel
//                   off, at its default K thresholds or at any K
//                   (tma_min_k = tma_min_k_cheap = 0), and the wgmma
//                   overlap on/off; fill_blocks (the blocks a tile must give
//                   before a bigger tile is worth its reuse: it picks the
//                   tile) at fractions and multiples of the multiprocessors;
//                   the tile knobs bk (32, 64), stages (4, 3, 2) and tma_bn
//                   (128, 256) one at a time, only the values that change
//                   the plan of the kernel's Contract (KernelFacts::
//                   gpu_contract; every value when there is none).
//   gpu             gpu.rows: a row-reduction kernel (rows to blocks with
//                   gpu.lanes loops) keeps its lanes with the row cache on
//                   or off, or gives them up for a thread per row; a flat
//                   kernel (a thread per element) takes threads per block
//                   64..max (powers of two) x vector_bytes 4, 8, 16.
//   gpu_attention   gpu.flash: wgmma on/off (sm_90a), min_keys at its
//                   default or 0 (the wgmma form at any key count).
//
// Candidates that differ only in knobs the kernel's code does not read (a
// TMA threshold of a GEMM that takes no TMA) may build the same code: the
// tuner compares the generated source and measures each code once.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tessel/loop/ir.h"
#include "tessel/schedule/schedule.h"
#include "tessel/tune/space.h"

namespace tessel {

// What a GPU space depends on of the device (an H100's values by default,
// so that tests need no GPU).
struct GpuDevice {
  std::string arch = "sm_90a";     // the cubin architecture: wgmma on sm_90a only
  int sm_count = 132;              // multiprocessors
  int max_threads_per_block = 1024;
};

// What the GPU spaces read of a lowered GPU kernel of kind `kind`
// (LoweredGroup::schedule): whether its rows go to blocks (a gpu.lanes
// loop), its output's elements (0 when symbolic), a gpu_mma kernel's
// Contract statement.
KernelFacts gpu_kernel_facts(const loop::Kernel& k, const std::string& kind);

// At most this many candidates a kernel (the default included).
constexpr size_t kGpuSpaceCap = 48;

// Every candidate of a gpu, gpu_mma or gpu_attention kernel: the default
// first, no two equal, each passing check_schedule, at most `cap`: those
// nearest the default (fewest knobs changed) are kept, in a fixed order.
// Another kind gets only its default. `f.gpu_row_blocks` tells a
// row-reduction kernel from a flat one.
std::vector<Schedule> gpu_search_space(const Schedule& default_schedule, const KernelFacts& f, const GpuDevice& d,
                                       size_t cap = kGpuSpaceCap);

}  // namespace tessel
