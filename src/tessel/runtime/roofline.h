// A step's time against the machine's ceilings (runtime/ceilings.h): the
// roofline of `tessel bench --profile` (docs/roofline.md).
//
// Each ceiling gives a least time for the step's work:
//   compute  = flops / FMA peak
//   memory   = bytes / the read bandwidth of the fastest level that can hold
//              the step's bytes (its working set)
//   launch   = the pool's cost to start and join a parallel step
// and the bound is launch + max(compute, memory): the time the step would
// take running at its ceiling (the attainable FLOP/s are min(peak,
// intensity x bandwidth)).
//
// The limiter is the ceiling that bounds the step's work: compute where its
// intensity reaches the ridge point (compute >= memory), else memory;
// except "launch" for steps too short to matter: a median under
// kLaunchBoundFactor launches, where at least half the step's time goes to
// starting it, whatever its work. (A long step whose work is tiny stays
// compute- or memory-bound, at a low % of bound: its kernel, not its
// launch, is slow.)
#pragma once

#include <array>
#include <string>
#include <vector>

#include "tessel/runtime/ceilings.h"
#include "tessel/runtime/step_cost.h"

namespace tessel {

enum class Limiter { Compute, Memory, Launch };
constexpr double kLaunchBoundFactor = 2;
constexpr int kLimiters = 3;
const char* limiter_name(Limiter l);  // "compute", "memory", "launch"

struct RooflinePoint {
  double seconds = 0;          // measured
  double flops = 0, bytes = 0;
  double intensity = 0;        // flops / bytes; 0 without flops
  std::string level;           // the memory level the bytes are bound by
  double compute_s = 0, memory_s = 0, launch_s = 0;
  double bound_s = 0;          // launch_s + max(compute_s, memory_s)
  double attainable_flops_per_s = 0;  // min(peak, intensity x bandwidth); 0 without flops
  double of_bound = 0;         // bound_s / seconds: 1 at the bound
  Limiter limiter = Limiter::Memory;
  std::string why;             // one short line
};

// The fastest level of `c` whose capacity holds `bytes` (the last, DRAM,
// holds anything).
const MemoryLevel& level_for(const CeilingSet& c, double bytes);

RooflinePoint roofline_point(const StepCost& cost, double seconds, const CeilingSet& c);

// A model's steps by limiter, and the whole at the bounds.
struct RooflineSummary {
  struct Part {
    double seconds = 0, bound_s = 0;
    int steps = 0;
  };
  std::array<Part, kLimiters> by_limiter{};  // indexed by Limiter
  double seconds = 0, bound_s = 0;          // summed over every step
};
RooflineSummary summarize_roofline(const std::vector<RooflinePoint>& points);

}  // namespace tessel
