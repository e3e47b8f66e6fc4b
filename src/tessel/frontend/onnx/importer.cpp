// ONNX ModelProto -> graph IR.
//
// Building one graph (the main graph or a subgraph) goes in three passes:
//   1. initializers, inputs and every node output are defined in the graph's
//      scope, so that nodes may appear in any order (topo_sort runs last);
//   2. nodes are created: inputs resolved innermost scope first (subgraphs
//      see the values of every enclosing graph), attributes converted
//      (subgraphs are built recursively here), the operator looked up in the
//      registry, old-opset nodes upgraded, arity checked;
//   3. graph outputs are resolved and given their declared types.
//
// Naming: the IR wants value names unique in the whole model; ONNX only
// promises uniqueness per graph, and subgraphs may shadow outer names. Values
// of the main graph keep their ONNX names; a subgraph value whose name is
// already taken gets a fresh one (`name__N`). Name resolution uses the ONNX
// names, so the renaming is invisible to the model.
//
// A graph input that also has an initializer of the same name (IR < 4 models
// list every weight as an input) becomes a constant, not an input: tessel
// compiles for fixed weights, so the initializer's value is the value.
//
// A subgraph output that is a value of an enclosing graph is copied by an
// Identity node, so that every subgraph output is defined in its subgraph.
#include "tessel/frontend/onnx/importer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>
#include <unordered_map>

#include "tessel/frontend/onnx/onnx_internal.h"
#include "tessel/support/error.h"

namespace tessel {
namespace onnx_import {
namespace {

// The newest ai.onnx opset known to the pinned onnx release (1.23.2).
constexpr int64_t kMaxOnnxOpset = 28;

struct Scope {
  Graph* g = nullptr;
  const Scope* parent = nullptr;
  std::unordered_map<std::string, Value*> names;

  Value* find(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->names.find(n);
      if (it != s->names.end()) return it->second;
    }
    return nullptr;
  }
};

std::string node_desc(const onnx::NodeProto& n) {
  return n.name().empty() ? str_cat(n.op_type(), " node") : str_cat(n.op_type(), " '", n.name(), "'");
}

std::string domain_desc(const std::string& d) { return d.empty() ? std::string("ai.onnx") : d; }

const char* attr_type_name(int t) {
  switch (t) {
    case onnx::AttributeProto::UNDEFINED: return "UNDEFINED";
    case onnx::AttributeProto::FLOAT: return "FLOAT";
    case onnx::AttributeProto::INT: return "INT";
    case onnx::AttributeProto::STRING: return "STRING";
    case onnx::AttributeProto::TENSOR: return "TENSOR";
    case onnx::AttributeProto::GRAPH: return "GRAPH";
    case onnx::AttributeProto::SPARSE_TENSOR: return "SPARSE_TENSOR";
    case onnx::AttributeProto::TYPE_PROTO: return "TYPE_PROTO";
    case onnx::AttributeProto::FLOATS: return "FLOATS";
    case onnx::AttributeProto::INTS: return "INTS";
    case onnx::AttributeProto::STRINGS: return "STRINGS";
    case onnx::AttributeProto::TENSORS: return "TENSORS";
    case onnx::AttributeProto::GRAPHS: return "GRAPHS";
    case onnx::AttributeProto::SPARSE_TENSORS: return "SPARSE_TENSORS";
    case onnx::AttributeProto::TYPE_PROTOS: return "TYPE_PROTOS";
  }
  return "unknown";
}

// The attribute kinds whose field is filled in `a` (for the type check).
std::vector<int> filled_kinds(const onnx::AttributeProto& a) {
  std::vector<int> k;
  if (a.has_f()) k.push_back(onnx::AttributeProto::FLOAT);
  if (a.has_i()) k.push_back(onnx::AttributeProto::INT);
  if (a.has_s()) k.push_back(onnx::AttributeProto::STRING);
  if (a.has_t()) k.push_back(onnx::AttributeProto::TENSOR);
  if (a.has_g()) k.push_back(onnx::AttributeProto::GRAPH);
  if (a.has_sparse_tensor()) k.push_back(onnx::AttributeProto::SPARSE_TENSOR);
  if (a.has_tp()) k.push_back(onnx::AttributeProto::TYPE_PROTO);
  if (a.floats_size()) k.push_back(onnx::AttributeProto::FLOATS);
  if (a.ints_size()) k.push_back(onnx::AttributeProto::INTS);
  if (a.strings_size()) k.push_back(onnx::AttributeProto::STRINGS);
  if (a.tensors_size()) k.push_back(onnx::AttributeProto::TENSORS);
  if (a.graphs_size()) k.push_back(onnx::AttributeProto::GRAPHS);
  if (a.sparse_tensors_size()) k.push_back(onnx::AttributeProto::SPARSE_TENSORS);
  if (a.type_protos_size()) k.push_back(onnx::AttributeProto::TYPE_PROTOS);
  return k;
}

class Importer {
 public:
  Importer(const onnx::ModelProto& mp, std::string base_dir) : mp_(mp) { ext_.base_dir = std::move(base_dir); }

  std::unique_ptr<Model> run() {
    TS_CHECK(mp_.has_graph(), "not an ONNX model: it has no graph");
    auto model = std::make_unique<Model>();
    model->ir_version = mp_.ir_version();
    model->producer_name = mp_.producer_name();
    for (const auto& kv : mp_.metadata_props()) model->metadata[kv.key()] = kv.value();

    for (const auto& os : mp_.opset_import()) {
      const std::string d = canonical_domain(os.domain());
      if (d.empty())
        TS_CHECK(os.version() >= 1 && os.version() <= kMaxOnnxOpset, "unsupported ai.onnx opset ", os.version(),
                 " (tessel supports opsets 1 to ", kMaxOnnxOpset, ")");
      else
        TS_CHECK(os.version() >= 1, "invalid opset version ", os.version(), " for domain '", d, "'");
      auto [it, inserted] = opsets_.emplace(d, os.version());
      TS_CHECK(inserted || it->second == os.version(), "opset of domain '", domain_desc(d),
               "' is imported twice with different versions (", it->second, " and ", os.version(), ")");
    }
    // Models before IR version 3 had no opset_import: they are opset 1.
    if (!opsets_.count("") && mp_.opset_import_size() == 0 && mp_.ir_version() < 3) opsets_[""] = 1;
    model->opsets = opsets_;

    collect_names(mp_.graph());
    for (const auto& fp : mp_.functions()) {
      for (const auto& n : fp.node()) collect_node_names(n);
    }
    inliner_ = std::make_unique<FunctionInliner>(mp_, opsets_, &names_);

    Graph& g = *model->graph;
    g.name = mp_.graph().name();
    Scope scope;
    scope.g = &g;
    build_graph(mp_.graph(), g, scope, &opsets_, "main graph");
    return model;
  }

 private:
  const onnx::ModelProto& mp_;
  ExternalDataContext ext_;
  OpsetMap opsets_;
  std::set<std::string> names_;  // every name the model uses, plus names given out
  SymbolNamer namer_;
  std::unique_ptr<FunctionInliner> inliner_;

  // ---- name collection: so that invented names never collide --------------
  void collect_type_syms(const onnx::TypeProto& t) {
    switch (t.value_case()) {
      case onnx::TypeProto::kTensorType:
        for (const auto& d : t.tensor_type().shape().dim())
          if (d.has_dim_param()) namer_.taken.insert(d.dim_param());
        break;
      case onnx::TypeProto::kSequenceType:
        if (t.sequence_type().has_elem_type()) collect_type_syms(t.sequence_type().elem_type());
        break;
      case onnx::TypeProto::kOptionalType:
        if (t.optional_type().has_elem_type()) collect_type_syms(t.optional_type().elem_type());
        break;
      default:
        break;
    }
  }
  void collect_node_names(const onnx::NodeProto& n) {
    for (const auto& s : n.input()) names_.insert(s);
    for (const auto& s : n.output()) names_.insert(s);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_names(a.g());
      for (const auto& sg : a.graphs()) collect_names(sg);
    }
  }
  void collect_names(const onnx::GraphProto& g) {
    auto vi = [&](const onnx::ValueInfoProto& v) {
      names_.insert(v.name());
      if (v.has_type()) collect_type_syms(v.type());
    };
    for (const auto& v : g.input()) vi(v);
    for (const auto& v : g.output()) vi(v);
    for (const auto& v : g.value_info()) vi(v);
    for (const auto& t : g.initializer()) names_.insert(t.name());
    for (const auto& t : g.sparse_initializer()) names_.insert(t.values().name());
    for (const auto& n : g.node()) collect_node_names(n);
  }

  // ---- values ---------------------------------------------------------------
  std::string ir_name(const std::string& onnx_name, Graph& g) {
    // Main-graph values are defined first, so they keep their names; later
    // (subgraph) duplicates get a suffix.
    if (!used_.count(onnx_name)) {
      used_.insert(onnx_name);
      return onnx_name;
    }
    for (int64_t k = 1;; ++k) {
      std::string n = str_cat(onnx_name, "__", k);
      if (!names_.count(n) && !used_.count(n)) {
        names_.insert(n);
        used_.insert(n);
        return n;
      }
    }
  }
  std::set<std::string> used_;  // names given to IR values so far

  void claim(Scope& s, const std::string& onnx_name, const std::string& what) {
    TS_CHECK(!onnx_name.empty(), what, " has an empty name");
    TS_CHECK(!s.names.count(onnx_name), "duplicate name: value '", onnx_name, "' is defined more than once (",
             what, ")");
  }

  Type declared_type(const onnx::ValueInfoProto& v, const std::string& what) {
    return v.has_type() ? decode_type(v.type(), namer_, what) : Type{};
  }

  // ---- attributes -------------------------------------------------------------
  Attribute convert_attr(const onnx::AttributeProto& a, Graph& g, Scope& scope, const OpsetMap* opsets,
                         const std::string& owner) {
    const std::string what = str_cat("attribute '", a.name(), "' of ", owner);
    TS_CHECK(!a.has_ref_attr_name(), what, " refers to attribute '", a.ref_attr_name(),
             "' outside of a function body");
    std::vector<int> filled = filled_kinds(a);
    int type = a.has_type() ? static_cast<int>(a.type()) : 0;
    if (type == onnx::AttributeProto::UNDEFINED) {
      // Very old models leave `type` unset: infer it from the filled field.
      TS_CHECK(filled.size() == 1, what, " has no type and ",
               filled.empty() ? "no value" : "values of several kinds");
      type = filled[0];
    }
    for (int k : filled)
      TS_CHECK(k == type, what, " is declared ", attr_type_name(type), " but holds a ", attr_type_name(k),
               " value");
    Attribute r;
    switch (type) {
      case onnx::AttributeProto::FLOAT:
        r = Attribute::of_float(a.f());
        break;
      case onnx::AttributeProto::INT:
        r = Attribute::of_int(a.i());
        break;
      case onnx::AttributeProto::STRING:
        r = Attribute::of_string(a.s());
        break;
      case onnx::AttributeProto::TENSOR:
        TS_CHECK(a.has_t(), what, " of type TENSOR has no tensor");
        r = Attribute::of_tensor(decode_tensor(a.t(), ext_, what));
        break;
      case onnx::AttributeProto::SPARSE_TENSOR:
        TS_CHECK(a.has_sparse_tensor(), what, " of type SPARSE_TENSOR has no tensor");
        r = Attribute::of_tensor(decode_sparse_tensor(a.sparse_tensor(), ext_, what));
        break;
      case onnx::AttributeProto::GRAPH:
        TS_CHECK(a.has_g(), what, " of type GRAPH has no graph");
        r = Attribute::of_graph(build_subgraph(a.g(), g, scope, opsets, what));
        break;
      case onnx::AttributeProto::TYPE_PROTO:
        TS_CHECK(a.has_tp(), what, " of type TYPE_PROTO has no type");
        r.kind = Attribute::Kind::TypeProto;
        r.type = decode_type(a.tp(), namer_, what);
        break;
      case onnx::AttributeProto::FLOATS:
        r = Attribute::of_floats(std::vector<float>(a.floats().begin(), a.floats().end()));
        break;
      case onnx::AttributeProto::INTS:
        r = Attribute::of_ints(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
        break;
      case onnx::AttributeProto::STRINGS:
        r = Attribute::of_strings(std::vector<std::string>(a.strings().begin(), a.strings().end()));
        break;
      case onnx::AttributeProto::TENSORS:
        r.kind = Attribute::Kind::Tensors;
        for (const auto& t : a.tensors()) r.tensors.push_back(decode_tensor(t, ext_, what));
        break;
      case onnx::AttributeProto::GRAPHS:
        r.kind = Attribute::Kind::Graphs;
        for (const auto& sg : a.graphs()) r.graphs.push_back(build_subgraph(sg, g, scope, opsets, what));
        break;
      default:
        fail(what, " has unsupported type ", attr_type_name(type), " (", type, ")");
    }
    return r;
  }

  std::shared_ptr<Graph> build_subgraph(const onnx::GraphProto& gp, Graph& parent, Scope& scope,
                                        const OpsetMap* opsets, const std::string& what) {
    auto sub = std::make_shared<Graph>();
    sub->parent = &parent;
    sub->name = gp.name();
    Scope inner;
    inner.g = sub.get();
    inner.parent = &scope;
    build_graph(gp, *sub, inner, opsets, str_cat("subgraph of ", what));
    return sub;
  }

  // ---- graphs -------------------------------------------------------------------
  void build_graph(const onnx::GraphProto& gp, Graph& g, Scope& scope, const OpsetMap* opsets,
                   const std::string& gwhat) {
    const std::string gname = gp.name().empty() ? gwhat : str_cat("graph '", gp.name(), "'");
    TS_CHECK(gp.output_size() > 0, gname, " has no outputs");

    // Pass 1: everything the graph defines.
    for (const auto& tp : gp.initializer()) {
      const std::string what = str_cat("initializer '", tp.name(), "'");
      claim(scope, tp.name(), what);
      Tensor t = decode_tensor(tp, ext_, what);
      scope.names[tp.name()] = g.add_initializer(ir_name(tp.name(), g), std::move(t));
    }
    for (const auto& sp : gp.sparse_initializer()) {
      const std::string& name = sp.values().name();
      const std::string what = str_cat("sparse initializer '", name, "'");
      claim(scope, name, what);
      Tensor t = decode_sparse_tensor(sp, ext_, what);
      scope.names[name] = g.add_initializer(ir_name(name, g), std::move(t));
    }
    std::set<std::string> seen_inputs;
    for (const auto& vi : gp.input()) {
      const std::string what = str_cat("input '", vi.name(), "' of ", gname);
      TS_CHECK(!vi.name().empty(), "an input of ", gname, " has an empty name");
      TS_CHECK(seen_inputs.insert(vi.name()).second, "duplicate name: ", gname, " has two inputs named '",
               vi.name(), "'");
      auto it = scope.names.find(vi.name());
      if (it != scope.names.end() && it->second->is_constant()) continue;  // input with a default: a constant
      claim(scope, vi.name(), what);
      scope.names[vi.name()] = g.add_input(ir_name(vi.name(), g), declared_type(vi, what));
    }
    // Declared types of intermediate values and outputs.
    std::unordered_map<std::string, const onnx::ValueInfoProto*> declared;
    for (const auto& vi : gp.value_info()) declared[vi.name()] = &vi;
    for (const auto& vi : gp.output()) declared[vi.name()] = &vi;

    std::vector<ExpandedNode> nodes = inliner_->expand(gp.node(), opsets);
    std::vector<std::vector<Value*>> outs(nodes.size());
    for (size_t k = 0; k < nodes.size(); ++k) {
      const onnx::NodeProto& np = nodes[k].node;
      for (const std::string& o : np.output()) {
        if (o.empty()) {
          outs[k].push_back(nullptr);
          continue;
        }
        const std::string what = str_cat("output of ", node_desc(np));
        claim(scope, o, what);
        auto d = declared.find(o);
        Type t = d != declared.end() ? declared_type(*d->second, str_cat("value '", o, "'")) : Type{};
        Value* v = g.add_value(ir_name(o, g), std::move(t));
        scope.names[o] = v;
        outs[k].push_back(v);
      }
    }

    // Pass 2: nodes.
    for (size_t k = 0; k < nodes.size(); ++k) build_node(nodes[k], std::move(outs[k]), g, scope);

    // Pass 3: outputs.
    for (const auto& vi : gp.output()) {
      TS_CHECK(!vi.name().empty(), "an output of ", gname, " has an empty name");
      Value* v = scope.find(vi.name());
      TS_CHECK(v, "output '", vi.name(), "' of ", gname, " is never produced");
      if (v->owner != &g) {
        // An enclosing graph's value: copy it so that the output is local.
        Value* copy = g.add_value(ir_name(vi.name(), g), declared_type(vi, "output"));
        g.add_node_with_outputs("Identity", {v}, {copy});
        v = copy;
      }
      g.outputs.push_back(v);
    }
    g.topo_sort();
  }

  void build_node(const ExpandedNode& en, std::vector<Value*> outs, Graph& g, Scope& scope) {
    const onnx::NodeProto& np = en.node;
    const std::string desc = node_desc(np);
    TS_CHECK(!np.op_type().empty(), "a node", np.name().empty() ? "" : str_cat(" ('", np.name(), "')"),
             " has no op_type");
    const std::string domain = canonical_domain(np.domain());
    const OpSchema* schema = OpRegistry::global().find(domain, np.op_type());
    TS_CHECK(schema, "unknown operator '", np.op_type(), "' (domain '", domain_desc(domain), "')");
    auto os = en.opsets->find(domain);
    TS_CHECK(os != en.opsets->end(), desc, ": the model does not import an opset for domain '",
             domain_desc(domain), "'");
    const int64_t opset = os->second;
    TS_CHECK(schema->removed_in == 0 || opset < schema->removed_in, desc, ": operator '", np.op_type(),
             "' was removed in opset ", schema->removed_in, " (the model uses opset ", opset, ")");

    std::vector<Value*> ins;
    ins.reserve(static_cast<size_t>(np.input_size()));
    for (const std::string& in : np.input()) {
      if (in.empty()) {
        ins.push_back(nullptr);
        continue;
      }
      Value* v = scope.find(in);
      TS_CHECK(v, desc, " uses undefined value '", in, "'");
      ins.push_back(v);
    }
    std::map<std::string, Attribute> attrs;
    for (const auto& a : np.attribute()) {
      TS_CHECK(!a.name().empty(), desc, " has an attribute without a name");
      TS_CHECK(!attrs.count(a.name()), desc, " has two attributes named '", a.name(), "'");
      attrs.emplace(a.name(), convert_attr(a, g, scope, en.opsets, desc));
    }
    Node* n = g.add_node_with_outputs(np.op_type(), std::move(ins), std::move(outs), std::move(attrs), domain);
    n->name = np.name();
    if (schema->upgrade) schema->upgrade(*n, opset);
    check_arity(*schema, *n);
  }
};

std::string read_file(const std::string& path) {
  struct stat st;
  TS_CHECK(::stat(path.c_str(), &st) == 0, "cannot open file: ", std::strerror(errno));
  TS_CHECK(S_ISREG(st.st_mode), "not a regular file");
  std::ifstream f(path, std::ios::binary);
  TS_CHECK(f, "cannot open file");
  // One read of the size stat gave: a character iterator took over a second
  // for a 650 MB model.
  std::string s(static_cast<size_t>(st.st_size), '\0');
  f.read(s.data(), static_cast<std::streamsize>(s.size()));
  TS_CHECK(!f.bad() && f.gcount() == static_cast<std::streamsize>(s.size()), "cannot read file");
  return s;
}

std::string dir_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Runs `f`, turning every other exception into tessel::Error so that callers
// only ever see one kind of failure.
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    fail("out of memory");
  } catch (const std::exception& e) {
    fail("internal error: ", e.what());
  }
}

bool parse_model(const void* data, size_t size, onnx::ModelProto* mp) {
  TS_CHECK(size > 0, "empty file: not an ONNX model");
  TS_CHECK(size <= static_cast<size_t>(INT32_MAX), "file too large for protobuf (", size, " bytes; 2 GiB max)");
  return mp->ParseFromArray(data, static_cast<int>(size));
}

Tensor decode_tensor_bytes(const std::string& bytes, const std::string& dir) {
  onnx::TensorProto tp;
  TS_CHECK(bytes.size() <= static_cast<size_t>(INT32_MAX) && tp.ParseFromString(bytes),
           "not a serialized TensorProto");
  ExternalDataContext ext{dir};
  return decode_tensor(tp, ext, tp.name().empty() ? std::string("tensor") : str_cat("tensor '", tp.name(), "'"));
}

// SequenceProto (onnx-data.proto): 3 = tensor_values. OptionalProto:
// 2 = elem_type, 3 = tensor_value, 5 = sequence_value. Read with the generic
// field walker since our compiled schema does not contain these messages.
bool decode_value_bytes(const std::string& bytes, const Type& type, const std::string& dir, RtValue* out) {
  ExternalDataContext ext{dir};
  auto tensors_of = [&](const std::string& b, int field) {
    std::vector<Tensor> ts;
    for (const std::string& s : unknown_bytes_fields(b, field)) {
      onnx::TensorProto tp;
      TS_CHECK(tp.ParseFromString(s), "malformed tensor in sequence/optional data");
      ts.push_back(decode_tensor(tp, ext, "tensor"));
    }
    return ts;
  };
  switch (type.kind) {
    case Type::Kind::Tensor:
      *out = RtValue(decode_tensor_bytes(bytes, dir));
      return true;
    case Type::Kind::Sequence: {
      if (type.elem && !type.elem->is_tensor()) return false;
      *out = RtValue::sequence(tensors_of(bytes, 3), type.elem ? *type.elem : Type{});
      return true;
    }
    case Type::Kind::Optional: {
      Type elem = type.elem ? *type.elem : Type{};
      auto t = tensors_of(bytes, 3);
      if (!t.empty()) {
        TS_CHECK(t.size() == 1, "optional data holds several tensors");
        *out = RtValue(std::move(t[0]));
        return true;
      }
      auto seqs = unknown_bytes_fields(bytes, 5);
      if (!seqs.empty()) {
        if (elem.kind != Type::Kind::Sequence || (elem.elem && !elem.elem->is_tensor())) return false;
        *out = RtValue::sequence(tensors_of(seqs.back(), 3), elem.elem ? *elem.elem : Type{});
        return true;
      }
      *out = RtValue::none(elem);
      return true;
    }
  }
  return false;
}

}  // namespace
}  // namespace onnx_import

std::unique_ptr<Model> import_onnx_bytes(const void* data, size_t size, const std::string& base_dir) {
  return onnx_import::guarded([&] {
    onnx::ModelProto mp;
    TS_CHECK(onnx_import::parse_model(data, size, &mp), "not an ONNX model (the protobuf does not parse; ",
             "truncated or not a model file?)");
    return onnx_import::Importer(mp, base_dir).run();
  });
}

std::unique_ptr<Model> import_onnx_file(const std::string& path) {
  return onnx_import::guarded([&] {
    std::string bytes = onnx_import::read_file(path);
    auto m = import_onnx_bytes(bytes.data(), bytes.size(), onnx_import::dir_of(path));
    m->source_path = path;
    return m;
  });
}

Tensor read_tensor_pb_file(const std::string& path) {
  return onnx_import::guarded([&] {
    return onnx_import::decode_tensor_bytes(onnx_import::read_file(path), onnx_import::dir_of(path));
  });
}

bool read_value_pb_file(const std::string& path, const Type& type, RtValue* out) {
  return onnx_import::guarded([&] {
    return onnx_import::decode_value_bytes(onnx_import::read_file(path), type, onnx_import::dir_of(path), out);
  });
}

}  // namespace tessel
