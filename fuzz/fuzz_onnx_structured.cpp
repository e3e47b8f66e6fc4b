// Structure-aware libFuzzer target for the ONNX path past the importer.
// Debian 12 packages no libprotobuf-mutator, so LLVMFuzzerCustomMutator
// below parses the input as an onnx::ModelProto and applies a few
// structural mutations (dims, dtypes, attributes, op types from the op
// registry, input wiring, dropped/duplicated/reordered nodes, initializer
// bytes, opset versions) before serialising it again: most mutants still
// import, so the fuzzer exercises shape inference, the graph pass pipeline
// and lowering to verified loop IR (the CPU compile without LLVM), and, for
// small models with static shapes and no loops, the reference interpreter.
//
// Any input must either go through or be refused with tessel::Error; a
// crash, a sanitizer report or another exception is a bug.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "onnx.pb.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/options.h"
#include "tessel/driver/session.h"
#include "tessel/frontend/onnx/importer.h"
#include "tessel/ir/dim.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

// ---- the mutator -------------------------------------------------------------

const std::vector<std::string>& known_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (const tessel::OpSchema* s : tessel::OpRegistry::global().all())
      if (s->domain.empty()) v.push_back(s->name);
    return v;
  }();
  return ops;
}

const std::vector<std::string> kAttrNames = {
    "axis", "axes", "perm", "keepdims", "kernel_shape", "strides", "pads", "dilations", "group", "transA",
    "transB", "alpha", "beta", "epsilon", "mode", "to", "split", "num_outputs", "noop_with_empty_axes", "auto_pad",
    "ceil_mode", "count_include_pad", "storage_order", "allowzero", "batch_dims", "largest", "sorted", "k",
    "value", "blocksize", "coordinate_transformation_mode", "select_last_index", "exclusive", "reverse"};
const std::vector<std::string> kStrings = {"", "constant", "reflect", "edge", "wrap", "NOTSET", "SAME_UPPER",
                                           "SAME_LOWER", "VALID", "linear", "nearest", "cubic", "DCR", "CRD",
                                           "half_pixel", "asymmetric", "align_corners", "round_prefer_floor"};
const std::vector<int> kDtypes = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 0, 99};
const std::vector<int64_t> kInts = {0,  1,  2,  3,  4,  -1, -2, 5, 7, 8, 16, 64, 1000, int64_t{1} << 31,
                                    int64_t{1} << 40, std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min()};
const std::vector<float> kFloats = {0.f, 1.f, -1.f, 0.5f, 1e-5f, 1e30f, std::numeric_limits<float>::quiet_NaN(),
                                    std::numeric_limits<float>::infinity()};

class Mutator {
 public:
  explicit Mutator(unsigned seed) : rng_(seed) {}

  void mutate(onnx::ModelProto& m) {
    onnx::GraphProto& g = *m.mutable_graph();
    for (int n = 1 + pick(3); n > 0; --n) {
      switch (pick(12)) {
        case 0: mutate_value_type(g); break;
        case 1:
        case 2: mutate_attribute(g); break;
        case 3: mutate_op_type(g); break;
        case 4: rewire_input(g); break;
        case 5: drop_node(g); break;
        case 6: duplicate_node(g); break;
        case 7: swap_nodes(g); break;
        case 8: mutate_initializer(g); break;
        case 9: mutate_opset(m); break;
        case 10: expose_output(g); break;
        case 11: mutate_value_type(g); break;
      }
    }
  }

 private:
  size_t pick(size_t n) { return n == 0 ? 0 : rng_() % n; }
  template <class T>
  const T& any(const std::vector<T>& v) { return v[pick(v.size())]; }
  int64_t any_int() { return pick(4) == 0 ? static_cast<int64_t>(rng_() % 33) - 16 : any(kInts); }

  onnx::NodeProto* any_node(onnx::GraphProto& g) {
    return g.node_size() == 0 ? nullptr : g.mutable_node(static_cast<int>(pick(g.node_size())));
  }

  // A graph input, output or value_info.
  onnx::ValueInfoProto* any_value(onnx::GraphProto& g) {
    const size_t n = g.input_size() + g.output_size() + g.value_info_size();
    if (n == 0) return nullptr;
    size_t i = pick(n);
    if (i < static_cast<size_t>(g.input_size())) return g.mutable_input(static_cast<int>(i));
    i -= g.input_size();
    if (i < static_cast<size_t>(g.output_size())) return g.mutable_output(static_cast<int>(i));
    return g.mutable_value_info(static_cast<int>(i - g.output_size()));
  }

  std::vector<std::string> value_names(const onnx::GraphProto& g) {
    std::vector<std::string> names = {""};
    for (const auto& v : g.input()) names.push_back(v.name());
    for (const auto& t : g.initializer()) names.push_back(t.name());
    for (const auto& n : g.node())
      for (const auto& o : n.output()) names.push_back(o);
    return names;
  }

  void mutate_value_type(onnx::GraphProto& g) {
    onnx::ValueInfoProto* v = any_value(g);
    if (!v) return;
    onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
    if (pick(4) == 0) return t->set_elem_type(any(kDtypes));
    onnx::TensorShapeProto* s = t->mutable_shape();
    if (s->dim_size() == 0 || pick(6) == 0) {
      s->add_dim()->set_dim_value(1 + pick(4));
      return;
    }
    if (pick(8) == 0) {
      s->mutable_dim()->RemoveLast();
      return;
    }
    onnx::TensorShapeProto_Dimension* d = s->mutable_dim(static_cast<int>(pick(s->dim_size())));
    if (pick(4) == 0)
      d->set_dim_param(pick(2) ? "batch" : "seq");
    else
      d->set_dim_value(any_int());
  }

  void set_random_value(onnx::AttributeProto* a) {
    switch (a->type()) {
      case onnx::AttributeProto::INT: a->set_i(any_int()); break;
      case onnx::AttributeProto::FLOAT: a->set_f(any(kFloats)); break;
      case onnx::AttributeProto::STRING: a->set_s(any(kStrings)); break;
      case onnx::AttributeProto::INTS:
        if (a->ints_size() == 0 || pick(3) == 0)
          a->add_ints(any_int());
        else if (pick(3) == 0)
          a->mutable_ints()->RemoveLast();
        else
          a->set_ints(static_cast<int>(pick(a->ints_size())), any_int());
        break;
      case onnx::AttributeProto::FLOATS:
        if (a->floats_size() == 0 || pick(3) == 0)
          a->add_floats(any(kFloats));
        else
          a->set_floats(static_cast<int>(pick(a->floats_size())), any(kFloats));
        break;
      default: a->set_type(onnx::AttributeProto::INT), a->set_i(any_int());
    }
  }

  void mutate_attribute(onnx::GraphProto& g) {
    onnx::NodeProto* n = any_node(g);
    if (!n) return;
    if (n->attribute_size() > 0 && pick(5) == 0) {
      n->mutable_attribute()->DeleteSubrange(static_cast<int>(pick(n->attribute_size())), 1);
      return;
    }
    if (n->attribute_size() == 0 || pick(3) == 0) {
      onnx::AttributeProto* a = n->add_attribute();
      a->set_name(any(kAttrNames));
      const onnx::AttributeProto::AttributeType types[] = {onnx::AttributeProto::INT, onnx::AttributeProto::INTS,
                                                           onnx::AttributeProto::FLOAT, onnx::AttributeProto::STRING};
      a->set_type(types[pick(4)]);
      set_random_value(a);
      return;
    }
    set_random_value(n->mutable_attribute(static_cast<int>(pick(n->attribute_size()))));
  }

  void mutate_op_type(onnx::GraphProto& g) {
    if (onnx::NodeProto* n = any_node(g)) n->set_op_type(any(known_ops()));
  }

  void rewire_input(onnx::GraphProto& g) {
    onnx::NodeProto* n = any_node(g);
    if (!n) return;
    const std::vector<std::string> names = value_names(g);
    if (n->input_size() == 0 || pick(4) == 0)
      n->add_input(any(names));
    else
      n->set_input(static_cast<int>(pick(n->input_size())), any(names));
  }

  void drop_node(onnx::GraphProto& g) {
    if (g.node_size() > 0) g.mutable_node()->DeleteSubrange(static_cast<int>(pick(g.node_size())), 1);
  }

  void duplicate_node(onnx::GraphProto& g) {
    onnx::NodeProto* n = any_node(g);
    if (!n) return;
    onnx::NodeProto copy = *n;
    for (int i = 0; i < copy.output_size(); ++i)
      if (!copy.output(i).empty()) copy.set_output(i, copy.output(i) + "_dup" + std::to_string(pick(1000)));
    *g.add_node() = copy;
  }

  void swap_nodes(onnx::GraphProto& g) {
    if (g.node_size() < 2) return;
    g.mutable_node()->SwapElements(static_cast<int>(pick(g.node_size())), static_cast<int>(pick(g.node_size())));
  }

  void mutate_initializer(onnx::GraphProto& g) {
    if (g.initializer_size() == 0) return;
    onnx::TensorProto* t = g.mutable_initializer(static_cast<int>(pick(g.initializer_size())));
    switch (pick(3)) {
      case 0:
        if (t->dims_size() > 0) t->set_dims(static_cast<int>(pick(t->dims_size())), any_int());
        break;
      case 1: t->set_data_type(any(kDtypes)); break;
      case 2: {
        std::string raw = t->raw_data();
        const size_t cap = raw.size() + 16;
        raw.resize(cap);
        raw.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(raw.data()), cap - 16, cap));
        t->set_raw_data(raw);
        break;
      }
    }
  }

  void mutate_opset(onnx::ModelProto& m) {
    if (m.opset_import_size() == 0) m.add_opset_import()->set_domain("");
    m.mutable_opset_import(0)->set_version(static_cast<int64_t>(1 + pick(24)));
  }

  void expose_output(onnx::GraphProto& g) {
    onnx::NodeProto* n = any_node(g);
    if (!n || n->output_size() == 0) return;
    onnx::ValueInfoProto* v = g.add_output();
    v->set_name(n->output(static_cast<int>(pick(n->output_size()))));
  }

  std::mt19937_64 rng_;
};

// ---- the target --------------------------------------------------------------

bool small_and_static(const tessel::Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op == "Loop" || n->op == "Scan" || !n->domain.empty()) return false;
  for (const auto& v : g.values()) {
    if (!v->type.has_shape() || !tessel::is_static(*v->type.shape)) return false;
    int64_t elems = 1;
    for (int64_t d : tessel::static_dims(*v->type.shape)) {
      if (d < 0 || d > 4096) return false;
      elems *= d;
      if (elems > 65536) return false;
    }
  }
  return true;
}

// The model imported and through the pass pipeline for `target` (symbols
// bound to 1), or nullptr where it is refused.
std::unique_ptr<tessel::Model> compile(const uint8_t* data, size_t size, tessel::Target target,
                                       std::map<std::string, int64_t>* dims, std::ostream* log) {
  try {
    auto m = tessel::import_onnx_bytes(data, size, "");
    tessel::DriverOptions o;
    o.target = target;
    o.log = log;
    *dims = tessel::bind_symbols(*m->graph, {}, {}, log);
    tessel::compile_model(*m, *dims, o);
    return m;
  } catch (const tessel::Error&) {
    return nullptr;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  onnx::ModelProto m;
  if (!m.ParseFromArray(data, static_cast<int>(size)) || !m.has_graph())
    return LLVMFuzzerMutate(data, size, max_size);
  Mutator(seed).mutate(m);
  std::string out;
  if (!m.SerializeToString(&out) || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::copy(out.begin(), out.end(), data);
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::ostringstream log;
  std::map<std::string, int64_t> dims;
  // The CPU compile without code generation: passes, fusion, lowering.
  if (auto m = compile(data, size, tessel::Target::Cpu, &dims, &log)) {
    try {
      tessel::LowerOptions lo;
      lo.log = &log;
      (void)tessel::lower_for_cpu(*m, lo);
    } catch (const tessel::Error&) {
    }
  }
  // The reference interpreter, where that is cheap.
  if (auto m = compile(data, size, tessel::Target::Reference, &dims, &log); m && small_and_static(*m->graph)) {
    try {
      const auto inputs = tessel::assemble_inputs(*m->graph, {}, dims, 0, &log);
      (void)tessel::execute(*m, inputs, tessel::Target::Reference, 1);
    } catch (const tessel::Error&) {
    }
  }
  return 0;
}
