// The TMA tensor maps of a kernel launch (cuda_source.h's TensorMapSpec),
// built on the host from the buffers' device addresses and the syms' values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/driver_api.h"

namespace tessel::cuda {

// One map per entry of `specs` (KernelSource::tensor_maps of `kernel`);
// `params` are the device addresses of the kernel's buffers (Kernel::params
// order). Dims that evaluate to 0 or less
// become 1: a kernel only copies boxes inside the tiles its extents give, so
// an empty dim is never read. Throws tessel::Error for a dim over 2^32 or an
// address or stride the driver rejects.
std::vector<TensorMap> encode_tensor_maps(const std::vector<TensorMapSpec>& specs, const std::vector<uint64_t>& params,
                                          const std::map<std::string, int64_t>& syms, const std::string& kernel);

}  // namespace tessel::cuda
