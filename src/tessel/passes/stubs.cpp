// Temporary stubs so that code written against the pass/printer/parser/verifier
// interfaces links while the real implementations land.
#include "tessel/ir/parser.h"
#include "tessel/ir/printer.h"
#include "tessel/ir/verifier.h"
#include "tessel/ops/registry.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"

namespace tessel {

bool run_pipeline(Model&, const PassOptions&) { return false; }
std::vector<std::string> pipeline_pass_names() { return {}; }
bool infer_shapes(Model&, const PassOptions&) { return false; }
bool fold_constants(Model&, const PassOptions&) { return false; }
bool eliminate_dead_code(Model&) { return false; }
bool eliminate_common_subexpressions(Model&) { return false; }
bool bind_dims(Model&, const std::map<std::string, int64_t>&) { return false; }

}  // namespace tessel
