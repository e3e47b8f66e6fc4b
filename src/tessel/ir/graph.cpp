#include "tessel/ir/graph.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "tessel/support/error.h"

namespace tessel {

Type Type::sequence(Type elem) {
  Type t;
  t.kind = Kind::Sequence;
  t.elem = std::make_shared<Type>(std::move(elem));
  return t;
}

Type Type::optional(Type elem) {
  Type t;
  t.kind = Kind::Optional;
  t.elem = std::make_shared<Type>(std::move(elem));
  return t;
}

std::string Type::str() const {
  switch (kind) {
    case Kind::Tensor: {
      std::string s(dtype_name(dtype));
      return s + (shape ? shape_str(*shape) : "[*]");
    }
    case Kind::Sequence: return "seq<" + (elem ? elem->str() : std::string("?")) + ">";
    case Kind::Optional: return "opt<" + (elem ? elem->str() : std::string("?")) + ">";
  }
  return "?";
}

bool operator==(const Type& a, const Type& b) {
  if (a.kind != b.kind || a.dtype != b.dtype || a.shape != b.shape) return false;
  if (!a.elem || !b.elem) return !a.elem && !b.elem;
  return *a.elem == *b.elem;
}

// ---- attributes ---------------------------------------------------------------

Attribute Attribute::of_int(int64_t v) { Attribute a; a.kind = Kind::Int; a.i = v; return a; }
Attribute Attribute::of_float(float v) { Attribute a; a.kind = Kind::Float; a.f = v; return a; }
Attribute Attribute::of_string(std::string v) { Attribute a; a.kind = Kind::String; a.s = std::move(v); return a; }
Attribute Attribute::of_ints(std::vector<int64_t> v) { Attribute a; a.kind = Kind::Ints; a.ints = std::move(v); return a; }
Attribute Attribute::of_floats(std::vector<float> v) { Attribute a; a.kind = Kind::Floats; a.floats = std::move(v); return a; }
Attribute Attribute::of_strings(std::vector<std::string> v) { Attribute a; a.kind = Kind::Strings; a.strings = std::move(v); return a; }
Attribute Attribute::of_tensor(Tensor v) { Attribute a; a.kind = Kind::Tensor; a.t = std::move(v); return a; }
Attribute Attribute::of_graph(std::shared_ptr<Graph> v) { Attribute a; a.kind = Kind::Graph; a.g = std::move(v); return a; }

const char* attr_kind_name(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::Int: return "int";
    case Attribute::Kind::Float: return "float";
    case Attribute::Kind::String: return "string";
    case Attribute::Kind::Tensor: return "tensor";
    case Attribute::Kind::Graph: return "graph";
    case Attribute::Kind::Ints: return "ints";
    case Attribute::Kind::Floats: return "floats";
    case Attribute::Kind::Strings: return "strings";
    case Attribute::Kind::Tensors: return "tensors";
    case Attribute::Kind::Graphs: return "graphs";
    case Attribute::Kind::TypeProto: return "type";
  }
  return "?";
}

// ---- nodes --------------------------------------------------------------------

std::string Node::describe() const {
  return name.empty() ? op : op + " '" + name + "'";
}

const Attribute& Node::attr(const std::string& n, Attribute::Kind kind) const {
  auto it = attrs.find(n);
  TS_CHECK(it != attrs.end(), describe(), ": missing attribute '", n, "'");
  TS_CHECK(it->second.kind == kind, describe(), ": attribute '", n, "' must be of type ", attr_kind_name(kind),
           ", got ", attr_kind_name(it->second.kind));
  return it->second;
}

namespace {
const Attribute* find_attr(const Node& node, const std::string& n, Attribute::Kind kind) {
  auto it = node.attrs.find(n);
  if (it == node.attrs.end()) return nullptr;
  TS_CHECK(it->second.kind == kind, node.describe(), ": attribute '", n, "' must be of type ",
           attr_kind_name(kind), ", got ", attr_kind_name(it->second.kind));
  return &it->second;
}
}  // namespace

int64_t Node::attr_int(const std::string& n, int64_t def) const {
  const Attribute* a = find_attr(*this, n, Attribute::Kind::Int);
  return a ? a->i : def;
}
float Node::attr_float(const std::string& n, float def) const {
  const Attribute* a = find_attr(*this, n, Attribute::Kind::Float);
  return a ? a->f : def;
}
std::string Node::attr_string(const std::string& n, const std::string& def) const {
  const Attribute* a = find_attr(*this, n, Attribute::Kind::String);
  return a ? a->s : def;
}
std::vector<int64_t> Node::attr_ints(const std::string& n, const std::vector<int64_t>& def) const {
  const Attribute* a = find_attr(*this, n, Attribute::Kind::Ints);
  return a ? a->ints : def;
}
std::vector<float> Node::attr_floats(const std::string& n, const std::vector<float>& def) const {
  const Attribute* a = find_attr(*this, n, Attribute::Kind::Floats);
  return a ? a->floats : def;
}
std::vector<std::string> Node::attr_strings(const std::string& n, const std::vector<std::string>& def) const {
  const Attribute* a = find_attr(*this, n, Attribute::Kind::Strings);
  return a ? a->strings : def;
}
const Tensor& Node::attr_tensor(const std::string& n) const { return attr(n, Attribute::Kind::Tensor).t; }
Graph& Node::attr_graph(const std::string& n) const {
  const Attribute& a = attr(n, Attribute::Kind::Graph);
  TS_CHECK(a.g != nullptr, describe(), ": attribute '", n, "' has no graph");
  return *a.g;
}

// ---- graphs -------------------------------------------------------------------

bool Graph::is_output(const Value* v) const {
  for (const Value* o : outputs)
    if (o == v) return true;
  return false;
}

Graph* Graph::root() {
  Graph* g = this;
  while (g->parent) g = g->parent;
  return g;
}

std::string Graph::fresh_name(const std::string& prefix) {
  Graph* r = root();
  for (;;) {
    std::string n = prefix + "_" + std::to_string(r->name_counter_++);
    bool taken = false;
    for_each_graph(*r, [&](Graph& g) { taken = taken || g.by_name_.count(n); });
    if (!taken) return n;
  }
}

Value* Graph::add_value(const std::string& name, Type type) {
  std::string n = name.empty() ? fresh_name("t") : name;
  TS_CHECK(!by_name_.count(n), "duplicate value name '", n, "'");
  auto v = std::make_unique<Value>();
  v->name = n;
  v->type = std::move(type);
  v->owner = this;
  Value* raw = v.get();
  values_.push_back(std::move(v));
  by_name_[n] = raw;
  return raw;
}

Value* Graph::add_input(const std::string& name, Type type) {
  Value* v = add_value(name, std::move(type));
  inputs.push_back(v);
  return v;
}

Value* Graph::add_initializer(const std::string& name, Tensor t) {
  Value* v = add_value(name, Type::tensor(t.dtype(), shape_of(t.shape())));
  v->constant = std::move(t);
  initializers.push_back(v);
  return v;
}

Node* Graph::make_node(const std::string& op, std::vector<Value*> ins, std::map<std::string, Attribute> attrs,
                       const std::string& domain) {
  auto n = std::make_unique<Node>();
  n->op = op;
  n->domain = domain;
  n->inputs = std::move(ins);
  n->attrs = std::move(attrs);
  n->owner = this;
  Node* raw = n.get();
  nodes_.push_back(std::move(n));
  return raw;
}

Node* Graph::add_node(const std::string& op, std::vector<Value*> ins, size_t num_outputs,
                      std::map<std::string, Attribute> attrs, const std::string& domain) {
  Node* n = make_node(op, std::move(ins), std::move(attrs), domain);
  for (size_t i = 0; i < num_outputs; ++i) {
    Value* v = add_value("", Type{});
    v->producer = n;
    v->producer_output = static_cast<int>(i);
    n->outputs.push_back(v);
  }
  return n;
}

Node* Graph::insert_node_before(Node* pos, const std::string& op, std::vector<Value*> ins, size_t num_outputs,
                                std::map<std::string, Attribute> attrs) {
  Node* n = add_node(op, std::move(ins), num_outputs, std::move(attrs));
  auto it_new = std::prev(nodes_.end());
  auto it_pos = std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return p.get() == pos; });
  TS_CHECK(it_pos != nodes_.end(), "insert_node_before: position is not in this graph");
  nodes_.splice(it_pos, nodes_, it_new);
  return n;
}

Node* Graph::add_node_with_outputs(const std::string& op, std::vector<Value*> ins, std::vector<Value*> outs,
                                   std::map<std::string, Attribute> attrs, const std::string& domain) {
  Node* n = make_node(op, std::move(ins), std::move(attrs), domain);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i]) continue;
    TS_CHECK(outs[i]->owner == this, "node output '", outs[i]->name, "' belongs to another graph");
    TS_CHECK(outs[i]->producer == nullptr && !outs[i]->is_constant(),
             "value '", outs[i]->name, "' is defined more than once");
    outs[i]->producer = n;
    outs[i]->producer_output = static_cast<int>(i);
  }
  n->outputs = std::move(outs);
  return n;
}

void Graph::remove_node(Node* n) {
  for (Value* v : n->outputs)
    if (v) {
      v->producer = nullptr;
      v->producer_output = -1;
    }
  nodes_.remove_if([&](const auto& p) { return p.get() == n; });
}

namespace {
void collect_used(Graph& g, std::unordered_set<const Value*>* used) {
  for (auto& n : g.nodes()) {
    for (Value* v : n->inputs)
      if (v) used->insert(v);
    for (auto& [k, a] : n->attrs) {
      if (a.kind == Attribute::Kind::Graph && a.g) collect_used(*a.g, used);
      for (auto& sg : a.graphs)
        if (sg) collect_used(*sg, used);
    }
  }
  for (Value* v : g.outputs) used->insert(v);
}
}  // namespace

void Graph::remove_unused_values() {
  std::unordered_set<const Value*> keep;
  collect_used(*this, &keep);
  for (Value* v : inputs) keep.insert(v);
  for (auto& n : nodes_)
    for (Value* v : n->outputs)
      if (v) keep.insert(v);
  std::erase_if(initializers, [&](Value* v) { return !keep.count(v); });
  for (auto& v : values_)
    if (!keep.count(v.get())) by_name_.erase(v->name);
  std::erase_if(values_, [&](const std::unique_ptr<Value>& v) { return !keep.count(v.get()); });
}

void Graph::replace_all_uses(Value* from, Value* to) {
  for_each_graph(*this, [&](Graph& g) {
    for (auto& n : g.nodes())
      for (Value*& v : n->inputs)
        if (v == from) v = to;
    // A subgraph may return an outer value as it is.
    for (Value*& v : g.outputs)
      if (v == from) v = to;
  });
}

void Graph::topo_sort() {
  // Kahn's algorithm, stable with respect to the current order. Uses inside
  // subgraphs count as uses by the node that owns the subgraph.
  std::unordered_map<const Value*, Node*> producer_here;
  for (auto& n : nodes_)
    for (Value* v : n->outputs)
      if (v) producer_here[v] = n.get();
  std::unordered_map<Node*, std::vector<Node*>> deps;
  for (auto& n : nodes_) {
    std::vector<Value*> used;
    std::function<void(Node&)> gather = [&](Node& m) {
      for (Value* v : m.inputs)
        if (v) used.push_back(v);
      for (auto& [k, a] : m.attrs) {
        std::vector<Graph*> gs;
        if (a.kind == Attribute::Kind::Graph && a.g) gs.push_back(a.g.get());
        for (auto& sg : a.graphs) gs.push_back(sg.get());
        for (Graph* sg : gs) {
          for (Value* v : sg->outputs) used.push_back(v);
          for (auto& inner : sg->nodes()) gather(*inner);
        }
      }
    };
    gather(*n);
    for (Value* v : used) {
      auto it = producer_here.find(v);
      if (it != producer_here.end() && it->second != n.get()) deps[n.get()].push_back(it->second);
      if (it != producer_here.end() && it->second == n.get()) fail("cycle: ", n->describe(), " uses its own output");
    }
  }
  std::list<std::unique_ptr<Node>> sorted;
  std::set<Node*> done;
  size_t remaining = nodes_.size();
  while (remaining) {
    bool progressed = false;
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      bool ready = true;
      for (Node* d : deps[it->get()])
        if (!done.count(d)) {
          ready = false;
          break;
        }
      if (ready) {
        done.insert(it->get());
        auto next = std::next(it);
        sorted.splice(sorted.end(), nodes_, it);
        it = next;
        --remaining;
        progressed = true;
      } else {
        ++it;
      }
    }
    TS_CHECK(progressed, "the graph has a cycle (through ", nodes_.front()->describe(), ")");
  }
  nodes_ = std::move(sorted);
}

Value* Graph::find_value(const std::string& n) const {
  for (const Graph* g = this; g; g = g->parent) {
    auto it = g->by_name_.find(n);
    if (it != g->by_name_.end()) return it->second;
  }
  return nullptr;
}

}  // namespace tessel
