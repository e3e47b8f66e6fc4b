// The default graph-pass pipeline, one linear function. Each step can be
// skipped by name (PassOptions::disabled), printed after
// (PassOptions::print_after = name or "all"), and is followed by the verifier
// when PassOptions::verify is set.
#include "tessel/passes/pass_manager.h"

#include <iostream>
#include <set>

#include "tessel/ir/printer.h"
#include "tessel/ir/verifier.h"
#include "tessel/support/error.h"
#include "tessel/support/phase_timer.h"

namespace tessel {

namespace {

struct TestPass {
  std::string name, after;
  std::function<bool(Model&)> run;
};

// add_test_pass's passes (tests only).
std::vector<TestPass>& test_passes() {
  static std::vector<TestPass> passes;
  return passes;
}

class Pipeline {
 public:
  Pipeline(Model& m, const PassOptions& o) : m_(m), o_(o) {}

  // Runs the pass unless disabled; true when it changed the model.
  template <class F>
  bool step(const std::string& name, F&& pass) {
    if (o_.disabled.count(name)) return false;
    bool changed = false;
    {
      PhaseTimer t("pass " + name);
      changed = pass();
      changed_ |= changed;
    }
    if (name == "infer_shapes") inferred_ = true;
    if (o_.print_after == name || o_.print_after == "all") {
      std::ostream& os = o_.print_stream ? *o_.print_stream : std::cerr;
      PrintOptions po;
      po.elide_large_constants = !o_.print_full_constants;
      os << "// ----- IR after " << name << " -----\n" << print_model(m_, po);
    }
    if (o_.verify) {
      VerifyOptions vo;
      vo.require_types = inferred_;
      try {
        verify_model(m_, vo);
      } catch (const Error& e) {
        fail("IR verification failed after ", name, ": ", e.what());
      }
    }
    if (o_.after_pass) o_.after_pass(name, changed);
    run_test_passes_after(name);
    return changed;
  }

  // Not a template (unlike step), so that steps of test passes do not
  // instantiate step without end.
  void run_test_passes_after(const std::string& name) {
    for (const TestPass& t : test_passes())
      if (t.after == name) step(t.name, std::function<bool()>([&] { return t.run(m_); }));
  }

  bool changed() const { return changed_; }

 private:
  Model& m_;
  const PassOptions& o_;
  bool changed_ = false;
  bool inferred_ = false;
};

}  // namespace

void add_test_pass(const std::string& name, const std::string& after, std::function<bool(Model&)> pass) {
  TS_CHECK(name != after, "a test pass cannot run after itself");
  test_passes().push_back({name, after, std::move(pass)});
}

void clear_test_passes() { test_passes().clear(); }

std::vector<std::string> pipeline_pass_names() {
  return {"bind_dims", "infer_shapes", "fold_constants", "dce", "cse", "infer_shapes", "simplify_algebra",
          "merge_matmuls", "split_to_slices",
          "lower_precision", "sink_transposes", "conv_im2col", "winograd_conv", "pad_conv_inputs", "subsample_conv_inputs", "blocked_layout", "fuse_attention", "gemm_weight_layout",
          "prepack_weights"};
}

bool run_pipeline(Model& m, const PassOptions& o) {
  for (const std::string& d : o.disabled) {
    bool known = false;
    std::string names;  // once each (infer_shapes runs twice), in pipeline order
    std::set<std::string> listed;
    for (const std::string& p : pipeline_pass_names()) {
      known = known || p == d;
      if (listed.insert(p).second) names += (names.empty() ? "" : ", ") + p;
    }
    TS_CHECK(known, "unknown pass '", d, "' (passes: ", names, ")");
  }
  if (!o.print_after.empty() && o.print_after != "all") {
    bool known = false;
    for (const std::string& p : pipeline_pass_names()) known = known || p == o.print_after;
    TS_CHECK(known, "unknown pass '", o.print_after, "' for print-after");
  }
  Pipeline p(m, o);
  // Symbols the user fixed (--dim) become constants before anything else, so
  // every later pass sees static shapes where it can.
  if (!o.dims.empty()) p.step("bind_dims", [&] { return bind_dims(m, o.dims); });
  // Types and shapes of every value; unifies the exporter's symbols with the
  // inferred expressions.
  p.step("infer_shapes", [&] { return infer_shapes(m, o); });
  // Folding and inference feed each other: folded constants sharpen shapes
  // downstream (a Pad by pads that are now constant), and sharper shapes let
  // more shape arithmetic fold (Swin's next block computes its pads from
  // that Pad's shape). Repeat until a round folds nothing new or sharpens no
  // shape; each round can only fold nodes, so the cap is a guard.
  const auto fold_until_stable = [&] {
    constexpr int kMaxRounds = 64;
    for (int round = 0; round < kMaxRounds; ++round) {
      // Constant subgraphs (weights preprocessing, shape arithmetic) become
      // constants.
      const bool folded = p.step("fold_constants", [&] { return fold_constants(m, o); });
      // Whatever folding left unused.
      p.step("dce", [&] { return eliminate_dead_code(m); });
      // Duplicate constants and computations (exporters repeat shape code).
      p.step("cse", [&] { return eliminate_common_subexpressions(m); });
      const bool sharpened = p.step("infer_shapes", [&] { return infer_shapes(m, o); });
      if (!folded || !sharpened) break;
    }
  };
  fold_until_stable();
  // x * 1, Transpose(Transpose(x)), reshape chains, no-op Casts...: after
  // folding, whose constants the rules read (a Reshape's shape), and before
  // the passes that match patterns for fusion, which see fewer nodes.
  p.step("simplify_algebra", [&] { return simplify_algebra(m, o.inexact_algebra); });
  // Projections of one value (attention's query, key and value) as one GEMM:
  // the weights are final now, and still f32 (precision converts the merged
  // ones like any other).
  p.step("merge_matmuls", [&] { return merge_matmuls(m); });
  // Each part of a Split as a Slice that fusion can take into its consumers.
  p.step("split_to_slices", [&] { return split_to_slices(m); });
  // --precision bf16|fp16: after folding, so that float shape arithmetic is
  // gone and the weights are final; folding again removes the Casts nobody
  // reads and folds those of constants.
  if (o.precision != DType::F32 && p.step("lower_precision", [&] { return lower_precision(m, o.precision); }))
    fold_until_stable();
  // A scaling after a Transpose goes before it, so that the Transpose can be
  // a view of a GEMM operand rather than the layout a kernel stores.
  p.step("sink_transposes", [&] { return sink_transposes(m); });
  // CUDA: convolutions whose implicit GEMM would gather per element read a
  // stored im2col instead (after precision: the weights are final).
  if (o.gpu) p.step("conv_im2col", [&] { return convs_to_im2col(m); });
  // CPU: stride-1 3x3 convolutions as Winograd F(4x4, 3x3) (before
  // pad_conv_inputs, which would pad their inputs for the direct GEMM).
  if (o.cpu && o.winograd)
    p.step("winograd_conv", [&] { return winograd_convs(m, o.blocked_layout, o.winograd_nchw); });
  // CPU: stride-1 convolutions read an explicitly padded input, whose rows
  // their GEMM copies whole (after precision: f32 convolutions only).
  if (o.cpu) p.step("pad_conv_inputs", [&] { return pad_conv_inputs(m); });
  // CPU: strided 1x1 convolutions read a strided Slice of their input and
  // run at stride 1, whose B rows their GEMM copies whole.
  if (o.cpu) p.step("subsample_conv_inputs", [&] { return subsample_conv_inputs(m); });
  // CPU: the activations between convolutions stored channel-blocked
  // (after the two above, whose Pad and Slice outputs are stored values
  // too).
  if (o.cpu && o.blocked_layout) p.step("blocked_layout", [&] { return block_conv_layouts(m); });
  // Attention written as separate ops -> one Attention node (the flash kernel's).
  if (o.fuse_attention) p.step("fuse_attention", [&] { return fuse_attention(m); });
  // Last: folding would undo it (a Transpose of a constant).
  p.step("gemm_weight_layout", [&] { return relayout_gemm_weights(m); });
  // CPU: constant GEMM weights stored in the packed GEMM's panels, so that
  // no call packs them (after gemm_weight_layout, whose Transposes of
  // constants it reads through).
  if (o.cpu) p.step("prepack_weights", [&] { return prepack_gemm_weights(m); });
  return p.changed();
}

}  // namespace tessel
