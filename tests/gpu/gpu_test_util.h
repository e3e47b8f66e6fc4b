// What every GPU test shares: skip (GTEST_SKIP, reported as skipped) where
// there is no usable GPU or no NVRTC, saying which is missing.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/codegen/cuda/nvrtc.h"

#define SKIP_WITHOUT_GPU()                                                                          \
  do {                                                                                              \
    std::string why_;                                                                               \
    if (!::tessel::cuda::cuda_available(&why_)) GTEST_SKIP() << "no usable GPU: " << why_;         \
    if (!::tessel::cuda::nvrtc_available(&why_)) GTEST_SKIP() << "NVRTC not available: " << why_;  \
  } while (0)
