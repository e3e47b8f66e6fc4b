// The graph-pass pipeline and the individual graph passes.
//
// Every pass is a free function that rewrites the model in place and returns
// true when it changed anything. run_pipeline strings them together in one
// linear, commented function (pass_manager.cpp) that can print the model after
// any pass and skip any pass by name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessel/ir/graph.h"

namespace tessel {

struct PassOptions {
  std::set<std::string> disabled;        // pass names to skip
  std::string print_after;               // pass name, "all", or "" (none)
  std::ostream* print_stream = nullptr;  // where print_after output goes (stderr if null)
  std::map<std::string, int64_t> dims;   // symbol bindings (--dim); empty = keep symbolic
  bool verify = true;                    // run the verifier after every pass
  int64_t fold_limit_elements = 1 << 20; // constant folding size cap
  bool print_full_constants = false;     // print_after: all constants in full (else >16 elements elided)
  DType precision = DType::F32;          // bf16/f16: lower_precision runs (--precision)
  bool gpu = false;                      // the CUDA target: conv_im2col runs
  bool cpu = false;                      // the compiled CPU target: prepack_weights runs
  // fuse_attention runs (the CUDA target's flash attention at bf16/fp16;
  // --knob gpu.flash.on=0 turns it off: driver/cuda_compiler.h).
  bool fuse_attention = false;
  // winograd_conv runs (the CPU target; on by default, --knob
  // conv.winograd.on=0 turns it off): over blocked values where
  // blocked_layout runs, in the NCHW form too where winograd_nchw (asked
  // for with conv.winograd.on=1; slower than the direct conv).
  bool winograd = false;
  bool winograd_nchw = false;
  // blocked_layout runs (the CPU target; on by default, --knob
  // conv.blocked.on=0 turns it off).
  bool blocked_layout = false;
  // simplify_algebra also applies rules that round differently in floating
  // point (a*b + a*c => a*(b+c)); off, its float results stay the same.
  bool inexact_algebra = false;
  // Called after every step that ran (not the disabled ones, test passes
  // included), with the step's name and whether it changed the model:
  // tessel bisect interprets the model there (driver/bisect.h).
  std::function<void(const std::string& pass, bool changed)> after_pass;
};

// Runs the default pipeline. Returns true if anything changed.
bool run_pipeline(Model& m, const PassOptions& o);
// Names of the pipeline's steps in order (as accepted by disabled/print_after;
// infer_shapes appears twice, bind_dims runs only when dims are given,
// lower_precision only when the precision is not f32, conv_im2col only for
// the GPU, fuse_attention only when asked, prepack_weights only for the CPU,
// last).
std::vector<std::string> pipeline_pass_names();

// Adds to `uses` every use of a value: inputs of the nodes of g and of its
// subgraphs (a subgraph's use keeps an outer value alive), and graph outputs
// (dce.cpp; fuse_attention's single-use test too).
void count_uses(Graph& g, std::unordered_map<const Value*, int>* uses);

// ---- individual passes (one file each) -------------------------------------
bool infer_shapes(Model& m, const PassOptions& o);     // shape_inference.cpp
bool fold_constants(Model& m, const PassOptions& o);   // constant_folding.cpp
bool eliminate_dead_code(Model& m);                    // dce.cpp
bool eliminate_common_subexpressions(Model& m);        // cse.cpp
// Rules such as x * 1 => x and Transpose(Transpose(x)) => x, to a fixed
// point; allow_inexact adds rules not exact in floating point
// (simplify_algebra.cpp).
bool simplify_algebra(Model& m, bool allow_inexact = false);
bool relayout_gemm_weights(Model& m);                  // gemm_weight_layout.cpp
bool convs_to_im2col(Model& m);                        // conv_im2col.cpp (CUDA target)
bool prepack_gemm_weights(Model& m);                   // prepack_weights.cpp (CPU target)
bool pad_conv_inputs(Model& m);                        // pad_conv_inputs.cpp (CPU target)
// Stride-1 3x3 convolutions as Winograd F(4x4, 3x3): with `blocked` over
// the channel-blocked layout where 16 divides both channel counts, the
// others in the NCHW form when `nchw` (winograd_conv.cpp, CPU target).
bool winograd_convs(Model& m, bool blocked = false, bool nchw = true);
bool subsample_conv_inputs(Model& m);                  // subsample_conv_inputs.cpp (CPU target)
bool block_conv_layouts(Model& m);                     // blocked_layout.cpp (CPU target)
bool sink_transposes(Model& m);                        // sink_transposes.cpp
// MatMuls of one value by constant matrices -> one MatMul and Slices
// (merge_matmuls.cpp).
bool merge_matmuls(Model& m);
// A Split -> one Slice per used output, which fusion can take into its
// consumers (split_to_slices.cpp).
bool split_to_slices(Model& m);
// Scaled dot-product attention as separate ops -> one ONNX Attention node
// (fuse_attention.cpp; in the pipeline when PassOptions::fuse_attention).
bool fuse_attention(Model& m);
// Folds graph inputs that only steer shapes into constants of the given
// values (bind_shape_inputs.cpp); run before the pipeline.
bool bind_shape_inputs(Model& m, const std::map<std::string, Tensor>& values);
// Substitutes symbol values into every type, then infers and folds again.
bool bind_dims(Model& m, const std::map<std::string, int64_t>& dims);  // bind_dims.cpp
// Rewrites an f32 model to compute in `low` (bf16 or f16), keeping its
// inputs, outputs and statistics in f32 (precision.cpp).
bool lower_precision(Model& m, DType low);

// ---- test-only --------------------------------------------------------------
// For tests of tessel bisect only: adds `pass` to the pipeline as a step named
// `name` that runs right after every step named `after`, so that a test can
// plant a deliberately wrong pass and check that bisect names it. Nothing
// outside tests calls these; with none added a step pays one empty-list check.
void add_test_pass(const std::string& name, const std::string& after, std::function<bool(Model&)> pass);
void clear_test_passes();

}  // namespace tessel
