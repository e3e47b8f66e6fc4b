// The embedded demo model of `tessel demo`: a small convolutional network
// (Conv+Relu+MaxPool+Flatten+Gemm+Softmax) built with the Graph API, with
// weights drawn from a fixed seed.
#pragma once

#include <cstdint>
#include <memory>

#include "tessel/ir/graph.h"

namespace tessel {

// Input "image" f32[1,3,16,16], output "probs" f32[1,10].
std::unique_ptr<Model> build_demo_model(uint64_t seed = 42);

}  // namespace tessel
