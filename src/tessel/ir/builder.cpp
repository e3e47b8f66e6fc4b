#include "tessel/ir/builder.h"

#include "tessel/support/error.h"

namespace tessel {

GraphBuilder::GraphBuilder(Model& m) : g_(m.graph.get()) {
  if (m.opsets.empty()) m.opsets[""] = 17;
  if (g_->name.empty()) g_->name = "main";
}

GraphBuilder::GraphBuilder(Graph& g) : g_(&g) {}

Value* GraphBuilder::input(const std::string& name, DType dt, Shape shape) {
  return g_->add_input(name, Type::tensor(dt, std::move(shape)));
}

Value* GraphBuilder::input(const std::string& name, Type type) { return g_->add_input(name, std::move(type)); }

Value* GraphBuilder::constant(Tensor t, const std::string& name) {
  return g_->add_initializer(name.empty() ? g_->fresh_name("c") : name, std::move(t));
}

Value* GraphBuilder::const_i64(const std::vector<int64_t>& v, const std::string& name) {
  return constant(Tensor::from_i64(v), name);
}

Value* GraphBuilder::scalar_i64(int64_t v, const std::string& name) { return constant(Tensor::scalar_i64(v), name); }

Value* GraphBuilder::const_f32(std::vector<int64_t> shape, const std::vector<float>& v, const std::string& name) {
  return constant(Tensor::from_f32(std::move(shape), v), name);
}

Value* GraphBuilder::scalar_f32(float v, const std::string& name) { return constant(Tensor::scalar_f32(v), name); }

Value* GraphBuilder::op(const std::string& op, std::vector<Value*> inputs, Attrs attrs, const std::string& domain) {
  return ops(op, std::move(inputs), 1, std::move(attrs), domain)[0];
}

std::vector<Value*> GraphBuilder::ops(const std::string& op, std::vector<Value*> inputs, size_t num_outputs,
                                      Attrs attrs, const std::string& domain) {
  last_ = g_->add_node(op, std::move(inputs), num_outputs, std::move(attrs), domain);
  return last_->outputs;
}

std::pair<Value*, Value*> GraphBuilder::op2(const std::string& op, std::vector<Value*> inputs, Attrs attrs,
                                            const std::string& domain) {
  auto o = ops(op, std::move(inputs), 2, std::move(attrs), domain);
  return {o[0], o[1]};
}

Value* GraphBuilder::typed(Value* v, Type t) {
  v->type = std::move(t);
  return v;
}

std::vector<Value*> GraphBuilder::ops_named(const std::string& op, std::vector<Value*> inputs,
                                            const std::vector<std::string>& out_names, Attrs attrs,
                                            const std::string& domain) {
  std::vector<Value*> outs;
  for (const std::string& n : out_names) {
    if (n == "-") {
      outs.push_back(nullptr);
      continue;
    }
    outs.push_back(g_->add_value(n.empty() ? g_->fresh_name("t") : n, Type{}));
  }
  last_ = g_->add_node_with_outputs(op, std::move(inputs), outs, std::move(attrs), domain);
  return outs;
}

void GraphBuilder::output(Value* v) { g_->outputs.push_back(v); }

void GraphBuilder::outputs(const std::vector<Value*>& vs) {
  for (Value* v : vs) output(v);
}

std::shared_ptr<Graph> GraphBuilder::subgraph(const std::string& name) {
  auto sg = std::make_shared<Graph>();
  sg->name = name;
  sg->parent = g_;
  return sg;
}

}  // namespace tessel
