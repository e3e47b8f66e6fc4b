// Helpers shared by the loop IR tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessel/loop/ir.h"

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

}  // namespace tessel::loop::testing
