#include "tessel/support/phase_timer.h"

#include <cstdio>

#include "tessel/support/env.h"

namespace tessel {

bool phase_timings_enabled() {
  static const bool on = [] {
    const auto v = env("TESSEL_TIMINGS");
    return v && *v != "0";
  }();
  return on;
}

void report_phase(const std::string& phase, double seconds) {
  if (phase_timings_enabled()) std::fprintf(stderr, "[time] %s: %.3f s\n", phase.c_str(), seconds);
}

double PhaseTimer::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void PhaseTimer::stop() {
  if (stopped_) return;
  stopped_ = true;
  report_phase(phase_, seconds());
}

}  // namespace tessel
