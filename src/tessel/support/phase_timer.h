// Wall-clock times of the compiler's phases, on stderr when the environment
// variable TESSEL_TIMINGS is set (to anything but "" or "0"):
//
//   [time] lower: 1.234 s
//
// Compile time is spent in a few phases (import, pass pipeline, fusion and
// lowering, simplification, LLVM, caches); this says which, without a
// profiler. Off, it costs one read of the environment per process.
#pragma once

#include <chrono>
#include <string>

namespace tessel {

bool phase_timings_enabled();

// Prints "[time] <phase>: <seconds> s" when timings are enabled.
void report_phase(const std::string& phase, double seconds);

// Times a scope; reports when it ends (or at stop()).
class PhaseTimer {
 public:
  explicit PhaseTimer(std::string phase) : phase_(std::move(phase)), start_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() { stop(); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  double seconds() const;
  void stop();

 private:
  std::string phase_;
  std::chrono::steady_clock::time_point start_;
  bool stopped_ = false;
};

}  // namespace tessel
