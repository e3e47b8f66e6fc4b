#include "tessel/frontend/onnx/importer.h"

#include "tessel/support/error.h"

namespace tessel {

std::unique_ptr<Model> import_onnx_file(const std::string& path) { fail("ONNX import not implemented yet"); }
std::unique_ptr<Model> import_onnx_bytes(const void*, size_t, const std::string&) {
  fail("ONNX import not implemented yet");
}
Tensor read_tensor_pb_file(const std::string&) { fail("ONNX import not implemented yet"); }
bool read_value_pb_file(const std::string&, const Type&, RtValue*) { fail("ONNX import not implemented yet"); }

}  // namespace tessel
