// GraphBuilder: writing graphs in C++ without the bookkeeping.
//
//   Model m;
//   GraphBuilder b(m);
//   Value* x = b.input("x", DType::F32, {Dim::sym("batch"), 3, 224, 224});
//   Value* w = b.constant(Tensor(DType::F32, {64, 3, 7, 7}), "w");
//   Value* y = b.op("Conv", {x, w}, {{"strides", Attribute::of_ints({2, 2})}});
//   auto [a, c] = b.op2("Split", {y}, {{"axis", Attribute::of_int(1)}});
//   b.output(y);
//
// Node outputs get fresh names and no type (run infer_shapes, or pass a type
// with typed()). Subgraphs: `auto body = b.subgraph("then"); GraphBuilder
// tb(*body); ...` then `b.op("If", {cond}, {{"then_branch", Attribute::of_graph(body)}})`.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessel/ir/graph.h"

namespace tessel {

using Attrs = std::map<std::string, Attribute>;

class GraphBuilder {
 public:
  explicit GraphBuilder(Model& m);  // builds m.graph (sets ai.onnx opset 17 if none)
  explicit GraphBuilder(Graph& g);  // builds any graph, e.g. a subgraph

  Graph& graph() { return *g_; }

  Value* input(const std::string& name, DType dt, Shape shape);
  Value* input(const std::string& name, Type type);
  Value* constant(Tensor t, const std::string& name = "");
  // Small constants.
  Value* const_i64(const std::vector<int64_t>& v, const std::string& name = "");  // 1-D
  Value* scalar_i64(int64_t v, const std::string& name = "");
  Value* const_f32(std::vector<int64_t> shape, const std::vector<float>& v, const std::string& name = "");
  Value* scalar_f32(float v, const std::string& name = "");

  // A node with one output; returns it. `inputs` may hold nullptr for an
  // omitted optional input.
  Value* op(const std::string& op, std::vector<Value*> inputs, Attrs attrs = {}, const std::string& domain = "");
  // A node with `num_outputs` outputs; returns them.
  std::vector<Value*> ops(const std::string& op, std::vector<Value*> inputs, size_t num_outputs, Attrs attrs = {},
                          const std::string& domain = "");
  std::pair<Value*, Value*> op2(const std::string& op, std::vector<Value*> inputs, Attrs attrs = {},
                                const std::string& domain = "");
  // The node that produced the last op()/ops() output (to set a name, say).
  Node* last_node() const { return last_; }

  // Sets the type of a value and returns it (for ops without inference).
  static Value* typed(Value* v, Type t);
  // A node whose outputs get the given names ("" = fresh name; "-" = an
  // omitted optional output, returned as nullptr).
  std::vector<Value*> ops_named(const std::string& op, std::vector<Value*> inputs,
                                const std::vector<std::string>& out_names, Attrs attrs = {},
                                const std::string& domain = "");

  void output(Value* v);
  void outputs(const std::vector<Value*>& vs);

  // A new empty graph nested in this one (parent set), for If/Loop/Scan bodies.
  std::shared_ptr<Graph> subgraph(const std::string& name);

 private:
  Graph* g_;
  Node* last_ = nullptr;
};

}  // namespace tessel
