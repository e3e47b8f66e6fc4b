// Shared by the text-format fuzz targets: a failed round trip is a finding,
// reported with both texts and turned into a crash libFuzzer keeps.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tessel::fuzz {

// Aborts (a libFuzzer crash with the input saved) when `first` and `second`,
// the text printed before and after a re-parse, differ.
inline void check_round_trip(const char* what, const std::string& first, const std::string& second) {
  if (first == second) return;
  std::fprintf(stderr, "%s does not round-trip.\n--- printed:\n%s\n--- printed again after parsing that:\n%s\n", what,
               first.c_str(), second.c_str());
  std::abort();
}

}  // namespace tessel::fuzz
