// Inlining of model-local functions (ModelProto.functions).
//
// A call node is replaced by the function's body: formal inputs and outputs
// are bound to the caller's value names, every other value of the body gets a
// fresh model-unique name, attribute references (`ref_attr_name`) take the
// caller's attribute or the function's default (FunctionProto.attribute_proto,
// read from the unknown fields since our compiled schema predates it) and are
// dropped when neither exists. Calls inside the body are expanded recursively
// (with a depth limit, so a recursive function is an error, not a hang).
// Subgraphs inside the body have their references to body values renamed
// (respecting names the subgraph defines itself) and their attribute
// references substituted too; calls inside such subgraphs are expanded when
// the importer builds the subgraph.
#include <functional>

#include "tessel/frontend/onnx/onnx_internal.h"
#include "tessel/support/error.h"

namespace tessel::onnx_import {
namespace {

constexpr int kMaxCallDepth = 64;
// Calls can multiply (f calls g twice, g calls h twice, ...): bound the result.
constexpr int64_t kMaxInlinedNodes = 10'000'000;

std::string func_key(const std::string& domain, const std::string& name, const std::string& overload) {
  return canonical_domain(domain) + '\0' + name + '\0' + overload;
}

std::string overload_of(const std::string& unknown, int field) {
  auto v = unknown_bytes_fields(unknown, field);
  return v.empty() ? std::string() : v.back();
}

using Rename = std::map<std::string, std::string>;
using AttrSubst = std::function<void(google::protobuf::RepeatedPtrField<onnx::AttributeProto>*)>;

void rename_in_graph(onnx::GraphProto* g, const Rename& outer, const AttrSubst& subst);

void rename_in_node_attrs(onnx::NodeProto* n, const Rename& names, const AttrSubst& subst) {
  subst(n->mutable_attribute());
  for (auto& a : *n->mutable_attribute()) {
    if (a.has_g()) rename_in_graph(a.mutable_g(), names, subst);
    for (auto& g : *a.mutable_graphs()) rename_in_graph(&g, names, subst);
  }
}

// Renames references to the enclosing function's values inside a subgraph.
void rename_in_graph(onnx::GraphProto* g, const Rename& outer, const AttrSubst& subst) {
  Rename names = outer;
  // Names the subgraph defines itself shadow the function's names.
  for (const auto& v : g->input()) names.erase(v.name());
  for (const auto& t : g->initializer()) names.erase(t.name());
  for (const auto& t : g->sparse_initializer()) names.erase(t.values().name());
  for (const auto& n : g->node())
    for (const auto& o : n.output()) names.erase(o);
  auto map_name = [&](std::string* s) {
    auto it = names.find(*s);
    if (it != names.end()) *s = it->second;
  };
  for (auto& n : *g->mutable_node()) {
    for (auto& i : *n.mutable_input()) map_name(&i);
    rename_in_node_attrs(&n, names, subst);
  }
  for (auto& o : *g->mutable_output()) map_name(o.mutable_name());
  for (auto& v : *g->mutable_value_info()) map_name(v.mutable_name());
}

}  // namespace

FunctionInliner::FunctionInliner(const onnx::ModelProto& mp, const OpsetMap& model_opsets,
                                 std::set<std::string>* names_taken)
    : names_(names_taken) {
  for (const auto& fp : mp.functions()) {
    TS_CHECK(!fp.name().empty(), "model-local function without a name");
    const std::string key = func_key(fp.domain(), fp.name(), overload_of(fp.unknown_fields(), 13));
    FunctionDef def;
    def.proto = &fp;
    def.opsets = model_opsets;
    for (const auto& os : fp.opset_import()) def.opsets[canonical_domain(os.domain())] = os.version();
    for (const std::string& bytes : unknown_bytes_fields(fp.unknown_fields(), 11)) {
      onnx::AttributeProto a;
      TS_CHECK(a.ParseFromString(bytes), "function '", fp.name(), "': malformed attribute default");
      def.defaults.push_back(std::move(a));
    }
    TS_CHECK(funcs_.emplace(key, std::move(def)).second, "model-local function '", fp.domain(), ".", fp.name(),
             "' is defined twice");
  }
}

const FunctionDef* FunctionInliner::lookup(const onnx::NodeProto& n) const {
  if (funcs_.empty()) return nullptr;
  auto it = funcs_.find(func_key(n.domain(), n.op_type(), overload_of(n.unknown_fields(), 8)));
  return it == funcs_.end() ? nullptr : &it->second;
}

std::string FunctionInliner::fresh(const std::string& fname, const std::string& orig) {
  for (;;) {
    std::string n = str_cat(fname, "_", counter_++, "__", orig);
    if (names_->insert(n).second) return n;
  }
}

std::vector<ExpandedNode> FunctionInliner::expand(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
                                                  const OpsetMap* opsets) {
  std::vector<ExpandedNode> out;
  out.reserve(static_cast<size_t>(nodes.size()));
  for (const auto& n : nodes) expand_into(n, opsets, 0, &out);
  return out;
}

void FunctionInliner::expand_into(const onnx::NodeProto& call, const OpsetMap* opsets, int depth,
                                  std::vector<ExpandedNode>* out) {
  const FunctionDef* f = lookup(call);
  if (!f) {
    TS_CHECK(++emitted_ <= kMaxInlinedNodes, "inlining model-local functions produces more than ", kMaxInlinedNodes,
             " nodes");
    out->push_back({call, opsets});
    return;
  }
  const onnx::FunctionProto& fp = *f->proto;
  const std::string fname = fp.name();
  TS_CHECK(depth < kMaxCallDepth, "calls of model-local function '", fname,
           "' nest too deeply (is the function recursive?)");
  TS_CHECK(call.input_size() <= fp.input_size(), "call of function '", fname, "' has ", call.input_size(),
           " inputs, the function takes ", fp.input_size());
  TS_CHECK(call.output_size() <= fp.output_size(), "call of function '", fname, "' has ", call.output_size(),
           " outputs, the function has ", fp.output_size());

  Rename rename;
  std::set<std::string> formal_in;
  for (int i = 0; i < fp.input_size(); ++i) {
    TS_CHECK(!fp.input(i).empty(), "function '", fname, "' has an unnamed input");
    TS_CHECK(formal_in.insert(fp.input(i)).second, "function '", fname, "' has two inputs named '", fp.input(i), "'");
    rename[fp.input(i)] = i < call.input_size() ? call.input(i) : std::string();
  }
  // Formal outputs that are formal inputs too are copied with an Identity.
  std::vector<std::pair<std::string, std::string>> passthrough;
  std::set<std::string> formal_out;
  for (int i = 0; i < fp.output_size(); ++i) {
    const std::string& o = fp.output(i);
    TS_CHECK(!o.empty(), "function '", fname, "' has an unnamed output");
    TS_CHECK(formal_out.insert(o).second, "function '", fname, "' has two outputs named '", o, "'");
    std::string actual = i < call.output_size() && !call.output(i).empty() ? call.output(i) : fresh(fname, o);
    if (formal_in.count(o)) passthrough.emplace_back(rename[o], actual);
    else rename[o] = actual;
  }
  std::set<std::string> produced;
  for (const auto& n : fp.node())
    for (const auto& o : n.output()) {
      if (o.empty()) continue;
      TS_CHECK(!formal_in.count(o), "function '", fname, "' redefines its input '", o, "'");
      TS_CHECK(produced.insert(o).second, "function '", fname, "' defines '", o, "' twice");
      if (!formal_out.count(o)) rename[o] = fresh(fname, o);
    }
  for (const auto& o : fp.output())
    TS_CHECK(produced.count(o) || formal_in.count(o), "function '", fname, "' never produces its output '", o, "'");

  // Attribute references resolve against the caller's attributes, then the
  // function's defaults.
  std::map<std::string, const onnx::AttributeProto*> caller_attrs;
  for (const auto& a : call.attribute()) caller_attrs[a.name()] = &a;
  for (const auto& a : f->defaults) caller_attrs.emplace(a.name(), &a);
  AttrSubst subst = [&](google::protobuf::RepeatedPtrField<onnx::AttributeProto>* attrs) {
    for (int i = 0; i < attrs->size();) {
      onnx::AttributeProto* a = attrs->Mutable(i);
      if (!a->has_ref_attr_name()) {
        ++i;
        continue;
      }
      auto it = caller_attrs.find(a->ref_attr_name());
      if (it == caller_attrs.end()) {
        attrs->DeleteSubrange(i, 1);
        continue;
      }
      std::string name = a->name();
      *a = *it->second;
      a->set_name(name);
      ++i;
    }
  };

  for (const auto& body : fp.node()) {
    onnx::NodeProto m = body;
    for (auto& in : *m.mutable_input()) {
      if (in.empty()) continue;
      auto it = rename.find(in);
      TS_CHECK(it != rename.end(), "function '", fname, "' uses undefined value '", in, "'");
      in = it->second;
    }
    for (auto& o : *m.mutable_output())
      if (!o.empty()) o = rename.at(o);
    rename_in_node_attrs(&m, rename, subst);
    expand_into(m, &f->opsets, depth + 1, out);
  }
  for (const auto& [from, to] : passthrough) {
    onnx::NodeProto id;
    id.set_op_type("Identity");
    id.add_input(from);
    id.add_output(to);
    out->push_back({std::move(id), opsets});
  }
}

}  // namespace tessel::onnx_import
