// Helpers of the CUDA code generator's unit tests (no GPU needed).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/loop/parser.h"
#include "tessel/support/error.h"

// Skips the test (reported as skipped) where NVRTC cannot be loaded.
#define SKIP_WITHOUT_NVRTC()                                                                      \
  do {                                                                                            \
    std::string why_;                                                                             \
    if (!::tessel::cuda::nvrtc_available(&why_)) GTEST_SKIP() << "NVRTC not available: " << why_; \
  } while (0)

namespace tessel::cuda::testing {

// Expects emit_cuda_source to refuse the kernel `text` with an error that mentions `what`.
inline void expect_rejected(const std::string& text, const std::string& what) {
  try {
    emit_cuda_source({loop::parse_kernel(text)});
    ADD_FAILURE() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

}  // namespace tessel::cuda::testing
