// Helpers shared by the loop IR tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

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

}  // namespace tessel::loop::testing
