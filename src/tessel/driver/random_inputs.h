// Seeded random values for model inputs that the user did not give (see
// docs/cli.md for the distributions):
//   - floating types: uniform in [-1, 1);
//   - bool: 0 or 1 with equal probability;
//   - integers: uniform in [0, n) where n is the size of the axis they index
//     when the input feeds (directly or through a short chain of Cast,
//     Reshape, Unsqueeze, ... ) the indices of a Gather-like op whose data has
//     a known size along that axis; otherwise uniform in [0, 8);
//   - strings: 1 to 8 random lowercase letters.
// The generator is a fixed algorithm (splitmix64), so a seed gives the same
// values on every platform and compiler.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"

namespace tessel {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : s_(seed) {}
  uint64_t next();
  double uniform01();                 // [0, 1)
  uint64_t below(uint64_t n);         // [0, n), n >= 1
 private:
  uint64_t s_;
};

// The smallest size of an axis that `v`'s values index, following `v`
// through value-preserving ops to Gather/GatherElements/GatherND/
// ScatterElements/ScatterND indices. nullopt when it indexes nothing known.
// `dims` evaluates symbolic sizes.
std::optional<int64_t> index_bound(const Graph& g, const Value* v, const std::map<std::string, int64_t>& dims);

// A random tensor of the given dtype and shape. `bound` applies to integers
// (values in [0, bound); default 8).
Tensor random_tensor(DType dt, const std::vector<int64_t>& shape, uint64_t seed, std::optional<int64_t> bound = {});

// Random value for graph input `index` of `g`, with every symbol of its shape
// bound by `dims`. Throws when its type is not a tensor of known dtype and
// rank, or a dim stays unbound.
Tensor random_input(const Graph& g, size_t index, const std::map<std::string, int64_t>& dims, uint64_t seed);

}  // namespace tessel
