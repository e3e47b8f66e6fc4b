#include "tessel/codegen/cuda/tensor_map.h"

#include <algorithm>

#include "tessel/loop/eval.h"
#include "tessel/support/error.h"

namespace tessel::cuda {

std::vector<TensorMap> encode_tensor_maps(const std::vector<TensorMapSpec>& specs, const std::vector<uint64_t>& params,
                                          const std::map<std::string, int64_t>& syms, const std::string& kernel) {
  std::vector<TensorMap> maps;
  for (const TensorMapSpec& t : specs) {
    TS_CHECK(t.param >= 0 && static_cast<size_t>(t.param) < params.size(), "CUDA: ", kernel,
             "'s tensor map names parameter ", t.param);
    const int rank = static_cast<int>(t.dims.size());
    TS_CHECK(rank >= 1 && rank <= 5 && t.strides.size() + 1 == t.dims.size() && t.box.size() == t.dims.size(),
             "CUDA: ", kernel, " has a malformed tensor map");
    uint64_t dims[5], strides[4];
    uint32_t box[5];
    for (int d = 0; d < rank; ++d) {
      const int64_t v = loop::eval_index(t.dims[d], syms);
      TS_CHECK(v <= (int64_t{1} << 32), "CUDA: ", kernel, ": a tensor map dim of ", v,
               " elements is over TMA's 2^32");
      dims[d] = static_cast<uint64_t>(std::max<int64_t>(v, 1));
      box[d] = static_cast<uint32_t>(t.box[d]);
      if (d > 0) strides[d - 1] = static_cast<uint64_t>(t.strides[d - 1]);
    }
    maps.push_back(encode_tensor_map(params[t.param] + static_cast<uint64_t>(t.offset) * 2, rank, dims, strides, box));
  }
  return maps;
}

}  // namespace tessel::cuda
