// The byte layout of a compiled artifact (`tessel compile MODEL -o FILE`).
//
//   0   "TESSELX1"
//   8   version u32 | section count u32 (4)
//   16  model section:     length u64 | checksum u64
//   32  code section:      length u64 | checksum u64
//   48  constants section: length u64 | checksum u64
//   64  cuda section:      length u64 | checksum u64
//   80  zero padding; at 128 the model section, then each next section at
//       the next multiple of 64 (zero padding between); the file ends where
//       the last one does.
//
// Checksums are fast_hash64 (support/fast_hash.h) of each section: the
// constants hold the model's weights (up to GBs), and byte-wise FNV-1a took
// 0.6 s of a 650 MB load. A damaged section is named in the error.
//
// All integers little-endian. Inside a section, fields follow each other:
// integers are u64 (signed ones two's complement), strings a u64 length then
// the bytes, lists a u64 count then the elements.
//   model:     the CPU name and features the code was compiled for (checked
//              first, so that a host lacking one is refused before any code
//              is loaded; empty for a CUDA artifact), the model's IR text,
//              the steps;
//   code:      the kernels' relocatable object file, raw (CPU artifacts);
//   constants: a count, then each constant as a u64 length, zero padding to
//              a multiple of 64 in the file, and its raw bytes (the IR names
//              them `dense<ext:N>`): aligned, so a loaded model borrows the
//              weights from the file's mapping instead of copying them;
//   cuda:      a list of cubins (empty for a CPU artifact), one per GPU
//              architecture: the arch ("sm_90a"), the image, and the launch
//              record of each distinct kernel (its functions, the grid and
//              block as loop IR expressions over its syms, dynamic shared
//              memory, TMA tensor maps).
//
// Version 4: the cuda section. Version 3: sections with their own
// checksums, aligned constants. Version 2: raw constants, fast checksum, a
// kernel's `entry` (identical kernels share one compiled function).
//
// Decoding is bounds-checked everywhere: a truncated, damaged or foreign file
// is a tessel::Error naming what is wrong, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

constexpr char kArtifactMagic[9] = "TESSELX1";
constexpr uint32_t kArtifactVersion = 4;

struct ArtifactKernel {
  std::string name;
  std::string entry;  // the object's function it runs (kernels with identical bodies share one)
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

// A TMA tensor map of a kernel launch (codegen/cuda/cuda_source.h's TensorMapSpec).
struct ArtifactTensorMap {
  uint64_t param = 0;
  int64_t offset = 0;
  std::vector<std::string> dims;  // loop IR expressions over the launch's syms
  std::vector<int64_t> strides;
  std::vector<int64_t> box;
};

// How one distinct GPU kernel launches (codegen/cuda/cuda_source.h's KernelSource).
struct ArtifactLaunch {
  std::string entry;          // the kernel name that steps' ArtifactKernel::entry refer to
  std::string symbol;         // its function in the cubin
  std::string narrow_symbol;  // its 32-bit-index variant ("" when none)
  int64_t narrow_limit = 0;
  std::vector<std::string> syms;   // the variables the expressions below use
  std::vector<std::string> grid;   // 3 loop IR expressions
  std::vector<std::string> block;  // 3 loop IR expressions
  uint64_t shared_bytes = 0;
  std::vector<ArtifactTensorMap> tensor_maps;
};

struct ArtifactCubin {
  std::string arch;  // "sm_90a"
  std::string image;
  std::vector<ArtifactLaunch> launches;
};

struct ArtifactContents {
  std::string cpu_name;                   // LLVM CPU name the code was compiled for
  std::vector<std::string> cpu_features;  // "+avx2", ...: features the code may use
  std::string model_ir;                   // print_model text of the model after the pass pipeline
  std::vector<ArtifactStep> steps;
  std::string object;                     // the kernels' object file (empty without kernels)
  // A CUDA artifact's cubins, one per architecture (empty: a CPU artifact).
  std::vector<ArtifactCubin> cuda;
  // The bytes of the IR's `dense<ext:N>` constants, in order. They point into
  // the encoded bytes (decode_artifact's argument, or `storage`) or, when
  // encoding, into the model's tensors: no copy of the weights is made.
  std::vector<std::string_view> constants;
  // When owned (read_artifact): the encoded file (a read-only mapping) that
  // `encoded` and `constants` point into.
  std::shared_ptr<const void> storage;
  std::string_view encoded;
};

std::string encode_artifact(const ArtifactContents& a);
// Throws tessel::Error: "not a tessel artifact", "artifact format version N
// (this tessel reads 4)", "truncated artifact", "corrupt artifact ...".
// The result's `constants` point into `bytes`, which must outlive them.
ArtifactContents decode_artifact(std::string_view bytes);

// The header's size, and whether a header of this version says the file
// holds cubins (a non-empty cuda section; nothing else is checked).
size_t artifact_header_bytes();
bool header_has_cuda_code(std::string_view head);

// The checksum of a section's bytes.
uint64_t artifact_checksum(const char* payload, size_t n);
// `bytes` with the header's section lengths and checksums recomputed (the
// last section takes the rest of the file): for tests that put damage past
// the checksums, into the decoder.
std::string reseal_artifact(std::string bytes);

// The features in `required` that `host` (both "+a,+b,-c" lists or vectors
// of "+a") does not enable, sorted.
std::vector<std::string> missing_cpu_features(const std::vector<std::string>& required, const std::string& host);

}  // namespace tessel
