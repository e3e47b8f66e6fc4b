// Temporary stubs so that code written against the pass/printer/parser/verifier
// interfaces links while the real implementations land.
#include "tessel/ir/parser.h"
#include "tessel/ir/printer.h"
#include "tessel/ir/verifier.h"
#include "tessel/ops/registry.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"

namespace tessel {

std::string print_model(const Model&, const PrintOptions&) { fail("print_model: not implemented yet"); }
std::string print_graph(const Graph&, const PrintOptions&) { fail("print_graph: not implemented yet"); }
std::string print_type(const Type& t) { return t.str(); }
std::string print_value_name(const std::string& n) { return "%" + n; }
std::string print_attribute(const Attribute&, const PrintOptions&) { fail("print_attribute: not implemented yet"); }
std::string print_tensor_literal(const Tensor&, const PrintOptions&) { fail("print_tensor_literal: not implemented yet"); }
std::unique_ptr<Model> parse_model(const std::string&) { fail("parse_model: not implemented yet"); }
Type parse_type(const std::string&) { fail("parse_type: not implemented yet"); }
void verify_model(const Model&) {}
void verify_model(const Model&, const OpRegistry&) {}
void verify_structure(const Model&) {}
bool run_pipeline(Model&, const PassOptions&) { return false; }
std::vector<std::string> pipeline_pass_names() { return {}; }
bool infer_shapes(Model&, const PassOptions&) { return false; }
bool fold_constants(Model&, const PassOptions&) { return false; }
bool eliminate_dead_code(Model&) { return false; }
bool eliminate_common_subexpressions(Model&) { return false; }
bool bind_dims(Model&, const std::map<std::string, int64_t>&) { return false; }

}  // namespace tessel
