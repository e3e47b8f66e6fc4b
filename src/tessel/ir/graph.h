// The graph IR: values, nodes, graphs (with nested subgraphs) and models.
//
// A Graph owns its Values and Nodes. Nodes are kept in topological order.
// Nodes of a subgraph (the body of If/Loop/Scan) may use Values of any
// enclosing graph directly; Value identity (the pointer) is what matters, names
// are for printing and for ONNX round trips and are unique within a model.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessel/ir/dim.h"
#include "tessel/ir/tensor.h"

namespace tessel {

class Graph;
class Node;

// The type of a value: a tensor (dtype + shape, shape possibly unknown), a
// sequence of tensors, or an optional.
struct Type {
  enum class Kind { Tensor, Sequence, Optional };
  Kind kind = Kind::Tensor;
  DType dtype = DType::Undefined;  // Tensor: element type; Undefined = unknown
  std::optional<Shape> shape;      // Tensor: nullopt = rank unknown
  std::shared_ptr<Type> elem;      // Sequence/Optional: element type

  static Type tensor(DType dt, Shape s) { return Type{Kind::Tensor, dt, std::move(s), nullptr}; }
  static Type tensor_unknown_shape(DType dt) { return Type{Kind::Tensor, dt, std::nullopt, nullptr}; }
  static Type sequence(Type elem);
  static Type optional(Type elem);
  bool is_tensor() const { return kind == Kind::Tensor; }
  bool has_shape() const { return kind == Kind::Tensor && shape.has_value(); }
  std::string str() const;  // "f32[batch,3]", "f32[?]"... see printer
};
bool operator==(const Type& a, const Type& b);

class Value {
 public:
  std::string name;
  Type type;
  Graph* owner = nullptr;     // the graph that defines it
  Node* producer = nullptr;   // nullptr for graph inputs and constants
  int producer_output = -1;
  // Set for initializers and folded constants (then producer == nullptr).
  std::optional<Tensor> constant;

  bool is_constant() const { return constant.has_value(); }
};

struct Attribute {
  enum class Kind { Int, Float, String, Tensor, Graph, Ints, Floats, Strings, Tensors, Graphs, TypeProto };
  Kind kind = Kind::Int;
  int64_t i = 0;
  float f = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  Type type;  // TypeProto

  static Attribute of_int(int64_t v);
  static Attribute of_float(float v);
  static Attribute of_string(std::string v);
  static Attribute of_ints(std::vector<int64_t> v);
  static Attribute of_floats(std::vector<float> v);
  static Attribute of_strings(std::vector<std::string> v);
  static Attribute of_tensor(Tensor v);
  static Attribute of_graph(std::shared_ptr<Graph> v);
};
const char* attr_kind_name(Attribute::Kind k);

class Node {
 public:
  std::string op;      // operator name, e.g. "Conv"
  std::string domain;  // "" for the default ONNX domain
  std::string name;    // optional, from the model
  std::vector<Value*> inputs;   // nullptr = omitted optional input
  std::vector<Value*> outputs;  // nullptr = omitted optional output
  std::map<std::string, Attribute> attrs;
  Graph* owner = nullptr;

  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  Value* input(size_t i) const { return has_input(i) ? inputs[i] : nullptr; }
  bool has_attr(const std::string& n) const { return attrs.count(n) != 0; }

  // Typed attribute getters: return the default when absent and throw
  // tessel::Error when present with another kind.
  int64_t attr_int(const std::string& n, int64_t def) const;
  float attr_float(const std::string& n, float def) const;
  std::string attr_string(const std::string& n, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& n, const std::vector<int64_t>& def = {}) const;
  std::vector<float> attr_floats(const std::string& n, const std::vector<float>& def = {}) const;
  std::vector<std::string> attr_strings(const std::string& n, const std::vector<std::string>& def = {}) const;
  // Required attributes: throw when absent or of another kind.
  const Attribute& attr(const std::string& n, Attribute::Kind kind) const;
  const Tensor& attr_tensor(const std::string& n) const;
  Graph& attr_graph(const std::string& n) const;

  // "Conv 'conv1'" for error messages.
  std::string describe() const;
};

class Graph {
 public:
  std::string name;
  Graph* parent = nullptr;  // enclosing graph for subgraphs
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  std::vector<Value*> initializers;  // constants owned by this graph, in order

  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Creation. Names must be unique in the model; pass "" for a fresh name.
  Value* add_value(const std::string& name, Type type);
  Value* add_input(const std::string& name, Type type);
  Value* add_initializer(const std::string& name, Tensor t);
  // Appends a node whose outputs are fresh values named by `out_names`
  // ("" = generated, types unknown until shape inference).
  Node* add_node(const std::string& op, std::vector<Value*> inputs, size_t num_outputs,
                 std::map<std::string, Attribute> attrs = {}, const std::string& domain = "");
  // Like add_node but places the node right before `pos` in the node order.
  Node* insert_node_before(Node* pos, const std::string& op, std::vector<Value*> inputs,
                           size_t num_outputs, std::map<std::string, Attribute> attrs = {});
  // Appends a node whose output values already exist (the importer uses this).
  Node* add_node_with_outputs(const std::string& op, std::vector<Value*> inputs,
                              std::vector<Value*> outputs, std::map<std::string, Attribute> attrs = {},
                              const std::string& domain = "");

  // Removes a node; its output values stay (dangling) until remove_unused_values.
  void remove_node(Node* n);
  // Drops values of this graph that are neither graph inputs/outputs,
  // initializers, nor produced/used by a node (uses in subgraphs included).
  void remove_unused_values();
  // Replaces every use of `from` by `to` in this graph, its subgraphs and the
  // graph outputs.
  void replace_all_uses(Value* from, Value* to);

  // Node order (topological).
  const std::list<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  std::list<std::unique_ptr<Node>>& nodes() { return nodes_; }
  const std::vector<std::unique_ptr<Value>>& values() const { return values_; }
  // Re-sorts nodes topologically (stable); throws tessel::Error on a cycle.
  void topo_sort();

  // Looks a value up by name in this graph, then in enclosing graphs.
  Value* find_value(const std::string& name) const;
  // A name not used in the model yet, starting with `prefix`.
  std::string fresh_name(const std::string& prefix);
  // Top-level graph of this graph.
  Graph* root();
  // Whether `v` is one of this graph's outputs.
  bool is_output(const Value* v) const;

 private:
  friend class Node;
  std::vector<std::unique_ptr<Value>> values_;
  std::list<std::unique_ptr<Node>> nodes_;
  std::map<std::string, Value*> by_name_;
  uint64_t name_counter_ = 0;  // for fresh_name, kept on the root graph
  Node* make_node(const std::string& op, std::vector<Value*> inputs, std::map<std::string, Attribute> attrs,
                  const std::string& domain);
};

// Calls f(graph) for g and every nested subgraph (pre-order).
template <class F>
void for_each_graph(Graph& g, F&& f);

class Model {
 public:
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  int64_t ir_version = 8;
  std::map<std::string, int64_t> opsets;  // domain -> version ("" = ai.onnx)
  std::string producer_name;
  std::map<std::string, std::string> metadata;
  std::string source_path;  // file the model was loaded from, for messages
};

template <class F>
void for_each_graph(Graph& g, F&& f) {
  f(g);
  for (auto& n : g.nodes())
    for (auto& [name, a] : n->attrs) {
      if (a.kind == Attribute::Kind::Graph && a.g) for_each_graph(*a.g, f);
      if (a.kind == Attribute::Kind::Graphs)
        for (auto& sg : a.graphs)
          if (sg) for_each_graph(*sg, f);
    }
}

}  // namespace tessel
