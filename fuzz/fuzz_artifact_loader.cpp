// libFuzzer target for the artifact loader (runtime/artifact_format.h,
// runtime/artifact_loader.h, runtime/object_loader.h, and a CUDA artifact's
// launch records, runtime/cuda/gpu_artifact.h): any input must either load
// or be refused with tessel::Error. The code is linked, never called (no
// GPU: cubins are not loaded).
//
// Inputs go through three doors: as they are (the header checks), resealed
// (reseal_artifact recomputes the section checksums, so that mutations reach
// the decoder, the model parser and the object loader), and, for an input
// that is an ELF file, straight into the object loader.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "tessel/runtime/artifact_loader.h"
#include "tessel/runtime/cuda/gpu_artifact.h"
#include "tessel/runtime/cpu_features.h"
#include "tessel/runtime/object_loader.h"
#include "tessel/support/error.h"

namespace {

void load(std::string_view bytes) {
  try {
    const tessel::ArtifactContents a = tessel::decode_artifact(bytes);
    for (const tessel::ArtifactCubin& c : a.cuda)
      for (const tessel::ArtifactLaunch& l : c.launches) tessel::kernel_launch(l);
    tessel::check_artifact_cpu(a, tessel::detected_cpu_features());
    auto model = tessel::artifact_model(a);
    if (!a.object.empty()) tessel::LoadedObject code(a.object);
  } catch (const tessel::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (size >= 4 && std::memcmp(data, "\x7f" "ELF", 4) == 0) {
    try {
      tessel::LoadedObject code(bytes);
    } catch (const tessel::Error&) {
    }
    return 0;
  }
  load(bytes);
  try {
    load(tessel::reseal_artifact(std::string(bytes)));
  } catch (const tessel::Error&) {  // too short to reseal
  }
  return 0;
}
