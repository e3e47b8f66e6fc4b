// The byte layout of a compiled artifact (`tessel compile MODEL -o FILE`).
//
//   "TESSELX1" | version u32 | payload length u64 | FNV-1a-64 of payload u64 | payload
//
// All integers little-endian. The payload is a sequence of fields: integers
// are u64, strings are a u64 length then the bytes, lists a u64 count then
// the elements. Its order puts what the loader checks first (the CPU the
// code was compiled for) before what it needs later (the model's IR text,
// the steps, the object file), so that a host lacking a required CPU feature
// is refused before any kernel code is loaded.
//
// Decoding is bounds-checked everywhere: a truncated, damaged or foreign file
// is a tessel::Error naming what is wrong, never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

constexpr char kArtifactMagic[9] = "TESSELX1";
constexpr uint32_t kArtifactVersion = 1;

struct ArtifactKernel {
  std::string name;
  std::vector<std::string> params;  // value names: inputs, then the output
  uint64_t num_inputs = 0;
  std::vector<std::string> syms;
  bool parallel = false;
  std::string parallel_extent;  // Dim text form
  std::vector<std::string> assert_messages;
  std::vector<uint64_t> nodes;  // indices into the graph's node list
  bool elementwise = false;
};

struct ArtifactStep {
  bool is_kernel = false;
  uint64_t node = 0;  // interpreter step: index into the graph's node list
  ArtifactKernel kernel;
};

struct ArtifactContents {
  std::string cpu_name;                   // LLVM CPU name the code was compiled for
  std::vector<std::string> cpu_features;  // "+avx2", ...: features the code may use
  std::string model_ir;                   // print_model text of the model after the pass pipeline
  std::vector<ArtifactStep> steps;
  std::string object;                     // the kernels' object file (empty without kernels)
};

std::string encode_artifact(const ArtifactContents& a);
// Throws tessel::Error: "not a tessel artifact", "artifact format version N
// (this tessel reads 1)", "truncated artifact", "corrupt artifact ...".
ArtifactContents decode_artifact(const std::string& bytes);

// The features in `required` that `host` (both "+a,+b,-c" lists or vectors
// of "+a") does not enable, sorted.
std::vector<std::string> missing_cpu_features(const std::vector<std::string>& required, const std::string& host);

}  // namespace tessel
