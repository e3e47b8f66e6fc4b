// The CPU features a kernel object may need, detected with CPUID and XGETBV
// (no LLVM): a deployed runtime refuses an artifact compiled for features
// this CPU lacks before it loads any code. Names are LLVM's spellings
// ("avx2", "avx512f", "sse4.1"), as the code generator records them.
#pragma once

#include <string>
#include <string_view>

namespace tessel {

// Whether CPUID detection covers `name` (without its '+'). Features outside
// the table (e.g. "sahf", "xsaveopt") are not instructions tessel's kernels
// use, and an artifact's check skips them.
bool cpu_feature_detectable(std::string_view name);

// "+avx,+avx2,-avx512f,...": every detectable feature, on or off for this CPU
// (AVX and AVX-512 counted only where the OS saves their registers), sorted.
std::string detected_cpu_features();

}  // namespace tessel
