#include "tessel/runtime/roofline.h"

#include <algorithm>
#include <cstdio>

#include "tessel/support/error.h"

namespace tessel {

namespace {

// Three significant digits: 1.27, 340, 0.0512.
std::string g3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string seconds_text(double s) { return s < 1e-3 ? g3(s * 1e6) + " us" : g3(s * 1e3) + " ms"; }

// One short line: the intensity against the ridge point (the intensity at
// which the level's bandwidth and the FMA peak give the same time), or the
// step's time against the launch.
std::string why(const RooflinePoint& p, const CeilingSet& c, const MemoryLevel& lv) {
  const std::string ridge = "ridge " + g3(c.fma_flops_per_s / lv.read_bytes_per_s) + " (" + lv.name + ")";
  switch (p.limiter) {
    case Limiter::Compute: return g3(p.intensity) + " FLOP/B >= " + ridge;
    case Limiter::Memory: {
      const std::string at = " at " + g3(lv.read_bytes_per_s / 1e9) + " GB/s";
      if (p.flops > 0) return g3(p.intensity) + " FLOP/B < " + ridge + at;
      return "no FLOPs: " + g3(p.bytes / 1e6) + " MB from " + lv.name + at;
    }
    case Limiter::Launch:
      return "took " + seconds_text(p.seconds) + " < " + g3(kLaunchBoundFactor) + " x launch " + seconds_text(p.launch_s);
  }
  return "";
}

}  // namespace

const char* limiter_name(Limiter l) {
  switch (l) {
    case Limiter::Compute: return "compute";
    case Limiter::Memory: return "memory";
    case Limiter::Launch: return "launch";
  }
  return "?";
}

const MemoryLevel& level_for(const CeilingSet& c, double bytes) {
  TS_CHECK(!c.levels.empty(), "ceilings: no memory level measured");
  for (const MemoryLevel& lv : c.levels)
    if (lv.capacity <= 0 || bytes <= double(lv.capacity)) return lv;
  return c.levels.back();
}

RooflinePoint roofline_point(const StepCost& cost, double seconds, const CeilingSet& c) {
  TS_CHECK(c.fma_flops_per_s > 0, "ceilings: the FMA peak must be positive");
  RooflinePoint p;
  p.seconds = seconds;
  p.flops = cost.flops;
  p.bytes = double(cost.bytes);
  const MemoryLevel& lv = level_for(c, p.bytes);
  TS_CHECK(lv.read_bytes_per_s > 0, "ceilings: the ", lv.name, " bandwidth must be positive");
  p.level = lv.name;
  p.intensity = p.flops > 0 && p.bytes > 0 ? p.flops / p.bytes : 0;
  p.compute_s = p.flops / c.fma_flops_per_s;
  p.memory_s = p.bytes / lv.read_bytes_per_s;
  p.launch_s = c.launch_s;
  p.bound_s = p.launch_s + std::max(p.compute_s, p.memory_s);
  if (p.flops > 0) p.attainable_flops_per_s = std::min(c.fma_flops_per_s, p.intensity * lv.read_bytes_per_s);
  p.of_bound = seconds > 0 ? p.bound_s / seconds : 0;
  // A tie goes to compute; a step without flops is never compute-bound.
  p.limiter = p.flops > 0 && p.compute_s >= p.memory_s ? Limiter::Compute : Limiter::Memory;
  if (seconds < kLaunchBoundFactor * p.launch_s) p.limiter = Limiter::Launch;
  p.why = why(p, c, lv);
  return p;
}

RooflineSummary summarize_roofline(const std::vector<RooflinePoint>& points) {
  RooflineSummary s;
  for (const RooflinePoint& p : points) {
    RooflineSummary::Part& part = s.by_limiter[static_cast<size_t>(p.limiter)];
    part.seconds += p.seconds;
    part.bound_s += p.bound_s;
    ++part.steps;
    s.seconds += p.seconds;
    s.bound_s += p.bound_s;
  }
  return s;
}

}  // namespace tessel
