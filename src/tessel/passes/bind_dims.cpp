// Binding symbolic dims to values (the CLI's --dim seq=128).
//
// Rewrites: every type of the model (graph inputs, values, subgraphs) with
// the given symbols replaced by their values, then re-runs shape inference
// and constant folding so that shapes derived from them (and shape
// computations such as Shape -> Gather -> Concat -> Reshape) become static.
//
// Does not fire for an empty binding or for symbols no type mentions (they
// are ignored: the CLI already tells the user about a --dim that names no
// input symbol). A negative value is an error.
//
// Assumes nothing about earlier passes; runs first in the pipeline when the
// user binds dims.
#include "tessel/passes/pass_manager.h"
#include "tessel/passes/symbols.h"
#include "tessel/support/error.h"

namespace tessel {

bool bind_dims(Model& m, const std::map<std::string, int64_t>& dims) {
  if (dims.empty()) return false;
  DimSubst subst;
  for (const auto& [name, value] : dims) {
    TS_CHECK(value >= 0, "--dim ", name, "=", value, ": a dimension cannot be negative");
    subst[name] = Dim(value);
  }
  if (!substitute_model_types(m, subst)) return false;
  bool changed = true;
  PassOptions o;
  changed |= infer_shapes(m, o);
  changed |= fold_constants(m, o);
  changed |= infer_shapes(m, o);
  return changed;
}

}  // namespace tessel
