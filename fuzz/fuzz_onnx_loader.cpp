// libFuzzer target for the ONNX loader: any input must either import or be
// refused with tessel::Error. Anything else (a crash, another exception, a
// sanitizer report, a leak, an allocation over the limit) is a bug.
#include <cstddef>
#include <cstdint>

#include "tessel/frontend/onnx/importer.h"
#include "tessel/support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    // No base folder: external data is refused, so the fuzzer cannot make
    // the loader read files.
    auto model = tessel::import_onnx_bytes(data, size, "");
    (void)model;
  } catch (const tessel::Error&) {
  }
  return 0;
}
