// Helpers shared by the loop IR tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessel/loop/eval.h"
#include "tessel/loop/ir.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/verifier.h"

namespace tessel::loop::testing {

inline BufferRef make_buffer(const std::string& name, DType t, std::vector<Expr> shape,
                             BufferScope scope = BufferScope::Param) {
  auto b = std::make_shared<Buffer>();
  b->name = name;
  b->dtype = t;
  b->shape = std::move(shape);
  b->scope = scope;
  return b;
}

// Parses a kernel and checks that it verifies.
inline Kernel verified_kernel(const std::string& text) {
  Kernel k = parse_kernel(text);
  verify(k);
  return k;
}

// Random bytes for every param (inputs and outputs alike, since kernels may
// read what they update), the same for a given seed.
inline std::vector<std::vector<uint8_t>> random_buffers(const Kernel& k, const std::map<std::string, int64_t>& syms,
                                                 uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint8_t>> out;
  for (const BufferRef& b : k.params) {
    int64_t n = 1;
    for (const Expr& d : b->shape) n *= std::max<int64_t>(0, eval_index(d, syms));
    std::vector<uint8_t> bytes(static_cast<size_t>(n * dtype_storage_size(b->dtype)));
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* at = bytes.data() + i * dtype_storage_size(b->dtype);
      if (b->dtype == DType::F32) {
        const float v = std::normal_distribution<float>()(rng);
        std::memcpy(at, &v, sizeof v);
      } else if (b->dtype == DType::I32) {
        const int32_t v = std::uniform_int_distribution<int32_t>(-50, 50)(rng);
        std::memcpy(at, &v, sizeof v);
      } else {
        ADD_FAILURE() << "random_buffers: add " << dtype_name(b->dtype);
      }
    }
    out.push_back(std::move(bytes));
  }
  return out;
}

inline std::vector<std::vector<uint8_t>> run(const Kernel& k, const std::map<std::string, int64_t>& syms, uint32_t seed,
                                      int64_t begin = 0, int64_t end = INT64_MAX) {
  std::vector<std::vector<uint8_t>> bufs = random_buffers(k, syms, seed);
  std::vector<void*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.data());
  std::vector<int64_t> sym_values;
  for (const std::string& s : k.syms) sym_values.push_back(syms.at(s));
  EXPECT_EQ(run_kernel_range(k, ptrs, sym_values, begin, end), 0);
  return bufs;
}

}  // namespace tessel::loop::testing
