// The default graph-pass pipeline, one linear function. Each step can be
// skipped by name (PassOptions::disabled), printed after
// (PassOptions::print_after = name or "all"), and is followed by the verifier
// when PassOptions::verify is set.
#include "tessel/passes/pass_manager.h"

#include <iostream>

#include "tessel/ir/printer.h"
#include "tessel/ir/verifier.h"
#include "tessel/support/error.h"
#include "tessel/support/phase_timer.h"

namespace tessel {

namespace {

class Pipeline {
 public:
  Pipeline(Model& m, const PassOptions& o) : m_(m), o_(o) {}

  template <class F>
  void step(const std::string& name, F&& pass) {
    if (o_.disabled.count(name)) return;
    {
      PhaseTimer t("pass " + name);
      changed_ |= pass();
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
  }

  bool changed() const { return changed_; }

 private:
  Model& m_;
  const PassOptions& o_;
  bool changed_ = false;
  bool inferred_ = false;
};

}  // namespace

std::vector<std::string> pipeline_pass_names() {
  return {"bind_dims", "infer_shapes", "fold_constants", "dce", "cse", "infer_shapes"};
}

bool run_pipeline(Model& m, const PassOptions& o) {
  for (const std::string& d : o.disabled) {
    bool known = false;
    for (const std::string& p : pipeline_pass_names()) known = known || p == d;
    TS_CHECK(known, "unknown pass '", d, "' (passes: bind_dims, infer_shapes, fold_constants, dce, cse)");
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
  // Constant subgraphs (weights preprocessing, shape arithmetic) become
  // constants.
  p.step("fold_constants", [&] { return fold_constants(m, o); });
  // Whatever folding left unused.
  p.step("dce", [&] { return eliminate_dead_code(m); });
  // Duplicate constants and computations (exporters repeat shape code).
  p.step("cse", [&] { return eliminate_common_subexpressions(m); });
  // Folded constants can sharpen shapes downstream (Reshape by a shape that
  // is now constant).
  p.step("infer_shapes", [&] { return infer_shapes(m, o); });
  return p.changed();
}

}  // namespace tessel
