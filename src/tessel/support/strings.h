// Small string helpers shared across stages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessel {

// The fields of `text` between `sep`s, empty ones included: "a,,b" gives
// {"a", "", "b"} and "" gives {""} (LLVM feature lists, --cuda-arch).
std::vector<std::string> split(std::string_view text, char sep);
// The parts with `sep` between them (split's inverse).
std::string join(const std::vector<std::string>& parts, std::string_view sep);

}  // namespace tessel
