// Measured schedule search for the GPU (`tessel tune --target cuda`).
//
// For a model (after the pass pipeline, symbols bound by the inputs):
//   1. Lower it with the default schedules (lower_for_cuda) and take its
//      distinct kernels by default hash, each with its uses and its space
//      (tune/gpu_space.h, for device 0).
//   2. Compile and run the default once: its outputs are the reference. Time
//      every step (GpuExecutable::profile_steps: each launch alone between
//      CUDA events, warm-up, median) and add the steps up per kernel: its
//      default time and weight (time x uses). Kernels under
//      TuneOptions::min_weight of the model are not searched.
//   3. Rounds, until the budget, the stop flag or every space runs out: each
//      searched kernel takes its next untried candidate (the space's order,
//      the nearest the default first; a seeded shuffle after the first
//      few), passing over candidates whose generated CUDA source is one it
//      has measured already (knobs its code does not read). The WHOLE model
//      is lowered with a lookup giving each kernel its candidate, compiled
//      as one NVRTC translation unit, run, and its outputs compared with the
//      reference (per-dtype tolerance, driver/compare.h); the profile gives
//      each candidate's time. A round that fails (outputs differ, NVRTC or a
//      launch fails) is measured again one candidate at a time, so that
//      only the culprits are counted wrong or failed (a launch failure is
//      followed by a run of the default; should that fail too, the device
//      is lost and the search ends with what it has).
//   4. Confirmation: each kernel's fastest candidate that beat its default
//      by min_gain is compiled together in one model, checked, and profiled
//      interleaved with the default (three pairs: the drift of the machine
//      hits both alike); a kernel keeps its candidate only where the median
//      still wins by min_gain.
//   5. on_kernel(KernelTuning) for every kernel (times per use).
// Interruptible: after the stop flag is set the current round finishes and
// the confirmation runs (a few seconds), so what was found is kept.
//
// No CPU code generator: this builds without LLVM (the GPU machine's build).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tessel/driver/compiler.h"
#include "tessel/driver/tuner.h"
#include "tessel/tune/gpu_space.h"

namespace tessel {

// Throws one clear tessel::Error where there is no usable GPU.
TuneReport tune_for_cuda(const Model& m, const std::vector<RtValue>& inputs, const TuneOptions& o,
                         const std::function<void(const KernelTuning&)>& on_kernel = {});

// ---- the parts (tested without a GPU) ----------------------------------------------

// One distinct kernel of a model lowered for the GPU, and where its search is.
struct GpuTuneKernel {
  const FusionGroup* group = nullptr;  // its first group (in the CompiledModel it came from)
  LoweredGroup lowered;                // with the default schedule
  int uses = 1;                        // groups that run it
  std::vector<Schedule> space;         // gpu_search_space, the default first
  std::vector<size_t> order;           // the candidates (indices into space) in the order they are tried
  size_t cursor = 0;                   // the next in order
  std::set<uint64_t> codes;            // hashes of the CUDA source of each code measured, the default's first
  bool searched = false;               // heavy enough to search (set by the tuner)
  int tried = 0;                       // candidates handed out by next_gpu_round
  int failed = 0;                      // candidates that did not lower or emit
};

// The distinct kernels of `c` (by LoweredGroup::default_hash) in plan order,
// each with its space on `d` and its trial order (`seed` shuffles all but
// the first few). `c` must outlive them.
std::vector<GpuTuneKernel> gpu_tune_kernels(const CompiledModel& c, const GpuDevice& d, uint64_t seed);

// The next round: for each searched kernel with fewer than `max_trials`
// candidates tried, its next candidate whose CUDA source (lowered for
// `arch`) differs from every code it has measured; none for a kernel whose
// candidates are used up. Keyed by default hash.
std::map<std::string, Schedule> next_gpu_round(std::vector<GpuTuneKernel>& ks, const std::string& arch,
                                               int max_trials);

// A lookup giving each kernel in `picks` (by default hash) its schedule.
ScheduleLookup schedule_picks(std::map<std::string, Schedule> picks);

// Per step of c's executable (build_steps order: one per group of the plan)
// the default hash of its kernel, "" for a step the interpreter runs.
std::vector<std::string> step_kernel_hashes(const CompiledModel& c);

// Each kernel's device time in microseconds, all its steps together: per
// step the median over `runs` (GpuExecutable::profile_steps), summed by
// hash. tessel::Error when a run has another number of steps.
std::map<std::string, double> kernel_times_us(const std::vector<std::string>& step_hashes,
                                              const std::vector<RunProfile>& runs);

}  // namespace tessel
