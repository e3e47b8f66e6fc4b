// Binding symbolic dims to values (the CLI's --dim seq=128).
//
// Rewrites: every type of the model (graph inputs, values, subgraphs) with
// the given symbols replaced by their values, then re-runs shape inference
// and constant folding so that shapes derived from them (and shape
// computations such as Shape -> Gather -> Concat -> Reshape) become static.
//
// Does not fire for an empty binding. A symbol that no type of the model
// mentions is an error (most likely a typo), as is a negative value.
//
// Assumes nothing about earlier passes; runs first in the pipeline when the
// user binds dims.
#include <set>

#include "tessel/passes/pass_manager.h"
#include "tessel/passes/symbols.h"
#include "tessel/support/error.h"

namespace tessel {

bool bind_dims(Model& m, const std::map<std::string, int64_t>& dims) {
  if (dims.empty()) return false;
  std::set<std::string> present;
  for_each_graph(*m.graph, [&](Graph& g) {
    for (const auto& v : g.values()) collect_type_symbols(v->type, &present);
  });
  DimSubst subst;
  for (const auto& [name, value] : dims) {
    TS_CHECK(value >= 0, "--dim ", name, "=", value, ": a dimension cannot be negative");
    if (!present.count(name)) {
      std::string known;
      for (const std::string& s : present) known += (known.empty() ? "" : ", ") + s;
      fail("--dim ", name, ": the model has no symbol '", name, "' (symbols: ",
           known.empty() ? std::string("none") : known, ")");
    }
    subst[name] = Dim(value);
  }
  bool changed = substitute_model_types(m, subst);
  PassOptions o;
  changed |= infer_shapes(m, o);
  changed |= fold_constants(m, o);
  changed |= infer_shapes(m, o);
  return changed;
}

}  // namespace tessel
