// ONNX import: turns an ONNX ModelProto into the graph IR.
//
// Every kind of bad input (truncated or non-protobuf bytes, bad tensors, bad
// names, unknown operators, unsafe external data paths, ...) is reported by
// throwing tessel::Error with a message that names the problem; the importer
// never aborts, reads out of bounds or allocates more than the data it was
// given justifies.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "tessel/ir/graph.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

namespace tessel {

// Loads an ONNX model file. External data is resolved relative to the file's folder.
// Throws tessel::Error("<what>") (no file prefix; the CLI adds "error: <file>: ").
std::unique_ptr<Model> import_onnx_file(const std::string& path);

// Same from memory; base_dir is the folder for external data ("" = external data refused).
std::unique_ptr<Model> import_onnx_bytes(const void* data, size_t size, const std::string& base_dir);

// Reads a serialized TensorProto (.pb file of the onnx_test_runner layout),
// e.g. test_data_set_0/input_0.pb.
Tensor read_tensor_pb_file(const std::string& path);

// Reads a .pb test-data file that may hold a TensorProto, a SequenceProto or
// an OptionalProto (the onnx_test_runner layout does not say which; the
// expected type is known from the model's graph input/output type). `type`
// is the declared type of the corresponding graph input/output. Returns false
// when the file does not decode as that kind of value.
bool read_value_pb_file(const std::string& path, const Type& type, RtValue* out);

}  // namespace tessel
