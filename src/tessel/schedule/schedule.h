// A schedule as data: what the lowering, the loop transformations and the
// code generators choose for one kernel, separate from what the kernel
// computes (Halide's and TVM's split of algorithm and schedule).
//
// A schedule is a list of primitives, applied in order. Two families:
//
//   - Loop primitives transform the loop IR of a lowered kernel by loop
//     variable name (schedule/loop_primitives.h): split, reorder, fuse,
//     tile, vectorize, unroll, parallel, bind (GPU axes).
//   - Template knobs steer the kernel templates that are written as
//     functions (the packed GEMM of schedule/gemm.h, the implicit-GEMM
//     convolution, the generic nest, the CUDA GEMM and flash-attention
//     builders): the register tile (tensorise to a micro-kernel), the cache
//     blocks, which buffers are packed (cache/pack), the parallel
//     decomposition, vector width, and on the GPU the tile, pipeline stages,
//     TMA, warp specialisation. Their names have a dot: "gemm.tile".
//
// Text form (one primitive a line, `#` starts a comment), which
// parse_schedule reads back to an equal Schedule:
//
//   schedule gemm {
//     gemm.tile mr=8 nr=32 lanes=16
//     gemm.block mc=96 kc=256 nc=512
//     gemm.parallel mode=tiles
//     gemm.pack a=1
//   }
//   schedule nest {
//     nest.vector width=16
//     split i factor=4 outer=i_o inner=i_i tail=guard
//     unroll i_i
//   }
//
// The kind after `schedule` names the template (nest, gemm, conv_gemm,
// contract, conv_contract, gpu_nest, gpu_gemm, gpu_attention); it must match
// the kernel's. check_schedule rejects unknown primitives, missing or
// malformed arguments and values outside their ranges with one clear error;
// what can only be checked against a kernel (a loop that does not exist, a
// split that does not divide) is checked where the primitive is applied.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel {

struct Primitive {
  std::string name;                                        // "split", "gemm.tile", ...
  std::vector<std::string> args;                           // positional: loop names
  std::vector<std::pair<std::string, std::string>> attrs;  // key=value, in written order

  // The value of `key`, or nullopt.
  std::optional<std::string> attr(std::string_view key) const;
  // The integer value of `key` (tessel::Error when it is there but not an
  // integer); `fallback` when it is absent.
  int64_t int_attr(std::string_view key, int64_t fallback) const;
  void set(const std::string& key, const std::string& value);
  void set(const std::string& key, int64_t value);
  bool operator==(const Primitive& o) const = default;
};

struct Schedule {
  std::string kind;  // the template: "nest", "gemm", "conv_gemm", ...
  std::vector<Primitive> prims;

  // The first primitive called `name`, or nullptr.
  const Primitive* find(std::string_view name) const;
  Primitive* find(std::string_view name);
  // find(name), appending an empty one when missing.
  Primitive& get(const std::string& name);
  bool operator==(const Schedule& o) const = default;
};

// The text form above (ends with a newline).
std::string print_schedule(const Schedule& s);
// Parses one schedule (tessel::Error with the line number on bad text) and
// checks it (check_schedule).
Schedule parse_schedule(std::string_view text);

// tessel::Error naming the primitive when `s` has an unknown primitive, an
// argument missing, an unknown key, a value of the wrong type or outside its
// range, or a primitive that does not belong to its kind.
void check_schedule(const Schedule& s);

// The primitive names check_schedule knows, for documentation and tests.
std::vector<std::string> known_primitives();

// ---- knobs set for a whole model (`--knob`) -------------------------------------
//
// "gpu.gemm.tma=0" is the template knob gpu.gemm with tma=0: every kernel
// whose kind takes gpu.gemm gets it, over its default (or tuned) value. What
// the TESSEL_CUDA_* environment switches used to choose, as data.

// tessel::Error when the text is not PRIMITIVE.KEY=VALUE of a known template
// knob, or the value is outside its range.
Primitive parse_knob(std::string_view text);
// tessel::Error when `knob` is not a template knob or one of its values is
// outside its key's range or set (what parse_knob and check_schedule check
// of each key), for a caller that takes knobs as data.
void check_knob(const Primitive& knob);
// The knob's text form, as parse_knob reads it (one key=value per knob).
std::string print_knob(const Primitive& knob);
// Every PRIMITIVE.KEY that --knob accepts with its values ("0..1",
// "serial|m_blocks|tiles"), in name order: `inspect --emit options` lists them.
std::vector<std::pair<std::string, std::string>> knob_keys();
// Sets each knob's values on `s` where s.kind takes the knob; true when
// anything changed. The result is checked (check_schedule).
bool apply_knobs(const std::vector<Primitive>& knobs, Schedule* s);
// The integer value of `name`.`key` among `knobs` (the last one given wins),
// else `fallback`.
int64_t knob_int(const std::vector<Primitive>& knobs, std::string_view name, std::string_view key,
                 int64_t fallback);

}  // namespace tessel
