// Hand-checked cases for the control-flow, sequence, recurrent, quantization,
// string and signal operators, and their refusal of bad input.
//
// The control-flow tests run in a private registry with two tiny helper ops
// (TAdd, TId) so that they only depend on the operators under test.
#include <gtest/gtest.h>

#include <cmath>

#include "tessel/interp/interpreter.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

// ---- a private registry ------------------------------------------------------------

void kernel_tadd(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  TS_CHECK(a.shape() == b.shape() || b.numel() == 1, "TAdd: shape mismatch");
  Tensor out(a.dtype(), a.shape());
  for (int64_t i = 0; i < a.numel(); ++i) out.set_f64(i, a.get_f64(i) + b.get_f64(b.numel() == 1 ? 0 : i));
  ctx.set_output(0, out);
}
void kernel_tid(KernelContext& ctx) { ctx.set_output_value(0, ctx.input_value(0)); }
void infer_tid(InferContext& ctx) { ctx.set_output_type(0, ctx.input_type(0)); }

const OpRegistry& test_registry() {
  static const OpRegistry reg = [] {
    OpRegistry r;
    register_control_ops(r);
    register_sequence_ops(r);
    r.add(OpSchema{"TAdd", "", 2, 2, 1, 1, infer_tid, kernel_tadd, nullptr, 1});
    r.add(OpSchema{"TId", "", 1, 1, 1, 1, infer_tid, kernel_tid, nullptr, 1});
    return r;
  }();
  return reg;
}

std::map<std::string, Attribute> graph_attr(const std::string& name, std::shared_ptr<Graph> g) {
  return {{name, Attribute::of_graph(std::move(g))}};
}

std::shared_ptr<Graph> subgraph(Graph& parent) {
  auto g = std::make_shared<Graph>();
  g->parent = &parent;
  g->name = parent.fresh_name("body");
  return g;
}

std::vector<float> floats_of(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.get_f64(i)));
  return v;
}

Tensor bool_scalar(bool b) {
  Tensor t(DType::Bool, {});
  t.set_i64(0, b);
  return t;
}

std::vector<RtValue> run(const Graph& g, const std::vector<RtValue>& in) {
  return Interpreter(test_registry()).run(g, in);
}

InferContext infer_node(const Node& n, const std::vector<const Type*>& in_types) {
  InferContext ctx(n);
  ctx.in_types = in_types;
  ctx.in_consts.assign(in_types.size(), nullptr);
  ctx.in_syms.assign(in_types.size(), nullptr);
  test_registry().find("", n.op)->infer(ctx);
  return ctx;
}

// ---- If ------------------------------------------------------------------------------

// then: x + 1 (reads the outer x directly); else: a constant of another shape.
struct IfGraph {
  Graph g;
  Node* node;
  IfGraph() {
    Value* c = g.add_input("c", Type::tensor(DType::Bool, {}));
    Value* x = g.add_input("x", Type::tensor(DType::F32, {2}));
    auto th = subgraph(g);
    Value* one = th->add_initializer("one", Tensor::scalar_f32(1));
    Node* add = th->add_node("TAdd", {x, one}, 1);
    add->outputs[0]->type = Type::tensor(DType::F32, {2});
    th->outputs = {add->outputs[0]};
    auto el = subgraph(g);
    Value* k = el->add_initializer("k", Tensor::from_f32({3}, {7, 8, 9}));
    el->outputs = {k};
    auto attrs = graph_attr("then_branch", th);
    attrs["else_branch"] = Attribute::of_graph(el);
    node = g.add_node("If", {c, x}, 1, attrs);
    node->inputs.resize(1);  // If has one input; x is read from the outer scope
    g.outputs = {node->outputs[0]};
  }
};

TEST(OpsControlIf, RunsTheSelectedBranchWithOuterValues) {
  IfGraph ig;
  Tensor x = Tensor::from_f32({2}, {1.5f, -2});
  auto t = run(ig.g, {bool_scalar(true), x});
  EXPECT_EQ(floats_of(t[0].tensor), (std::vector<float>{2.5f, -1}));
  auto e = run(ig.g, {bool_scalar(false), x});
  EXPECT_EQ(floats_of(e[0].tensor), (std::vector<float>{7, 8, 9}));
}

TEST(OpsControlIf, InferMergesDifferingDimsIntoASymbol) {
  IfGraph ig;
  Type c = Type::tensor(DType::Bool, {});
  InferContext ctx = infer_node(*ig.node, {&c});
  const Type& out = ctx.out_types[0];
  ASSERT_TRUE(out.has_shape());
  ASSERT_EQ(out.shape->size(), 1u);
  EXPECT_FALSE((*out.shape)[0].is_const());
  EXPECT_EQ(out.dtype, DType::F32);
}

TEST(OpsControlIf, RejectsNonBoolCondition) {
  IfGraph ig;
  Tensor bad = Tensor::scalar_f32(1);
  EXPECT_THROW(run(ig.g, {bad, Tensor::from_f32({2}, {0, 0})}), Error);
  Type c = Type::tensor(DType::F32, {});
  EXPECT_THROW(infer_node(*ig.node, {&c}), Error);
}

// ---- Loop ----------------------------------------------------------------------------

// Loop(M, cond, y): body y_out = y_in + iter; scan output = y_out.
struct LoopGraph {
  Graph g;
  Node* node;
  explicit LoopGraph(bool with_cond = true) {
    Value* m = g.add_input("M", Type::tensor(DType::I64, {}));
    Value* c = with_cond ? g.add_input("cond", Type::tensor(DType::Bool, {})) : nullptr;
    Value* y = g.add_input("y", Type::tensor(DType::F32, {1}));
    auto body = subgraph(g);
    Value* it = body->add_input("iter", Type::tensor(DType::I64, {}));
    Value* ci = body->add_input("cond_in", Type::tensor(DType::Bool, {}));
    Value* yi = body->add_input("y_in", Type::tensor(DType::F32, {1}));
    Node* add = body->add_node("TAdd", {yi, it}, 1);
    add->outputs[0]->type = Type::tensor(DType::F32, {1});
    Node* cid = body->add_node("TId", {ci}, 1);
    Node* sid = body->add_node("TId", {add->outputs[0]}, 1);
    sid->outputs[0]->type = Type::tensor(DType::F32, {1});
    body->outputs = {cid->outputs[0], add->outputs[0], sid->outputs[0]};
    node = g.add_node("Loop", {m, c, y}, 2, graph_attr("body", body));
    g.outputs = node->outputs;
  }
};

TEST(OpsControlLoop, CarriesValuesAndStacksScanOutputs) {
  LoopGraph lg;
  auto out = run(lg.g, {Tensor::scalar_i64(4), bool_scalar(true), Tensor::from_f32({1}, {10})});
  // y: 10 -> 10 -> 11 -> 13 -> 16
  EXPECT_EQ(floats_of(out[0].tensor), (std::vector<float>{16}));
  EXPECT_EQ(out[1].tensor.shape(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(floats_of(out[1].tensor), (std::vector<float>{10, 11, 13, 16}));
}

TEST(OpsControlLoop, ZeroTripsGiveInitialValuesAndEmptyScans) {
  LoopGraph lg;
  auto out = run(lg.g, {Tensor::scalar_i64(0), bool_scalar(true), Tensor::from_f32({1}, {10})});
  EXPECT_EQ(floats_of(out[0].tensor), (std::vector<float>{10}));
  EXPECT_EQ(out[1].tensor.shape(), (std::vector<int64_t>{0, 1}));
  auto out2 = run(lg.g, {Tensor::scalar_i64(5), bool_scalar(false), Tensor::from_f32({1}, {10})});
  EXPECT_EQ(floats_of(out2[0].tensor), (std::vector<float>{10}));
}

TEST(OpsControlLoop, InferAddsATripCountDim) {
  LoopGraph lg;
  Type m = Type::tensor(DType::I64, {}), c = Type::tensor(DType::Bool, {}), y = Type::tensor(DType::F32, {1});
  InferContext ctx = infer_node(*lg.node, {&m, &c, &y});
  EXPECT_EQ(ctx.out_types[0], Type::tensor(DType::F32, {1}));
  ASSERT_TRUE(ctx.out_types[1].has_shape());
  EXPECT_EQ(ctx.out_types[1].shape->size(), 2u);
  EXPECT_FALSE((*ctx.out_types[1].shape)[0].is_const());
}

TEST(OpsControlLoop, RejectsBadTripCount) {
  LoopGraph lg;
  EXPECT_THROW(run(lg.g, {Tensor::scalar_f32(3), bool_scalar(true), Tensor::from_f32({1}, {0})}), Error);
  EXPECT_THROW(run(lg.g, {Tensor::from_i64({1, 2}), bool_scalar(true), Tensor::from_f32({1}, {0})}), Error);
}

// ---- Scan ----------------------------------------------------------------------------

// Scan(state[2], x[3,2]) with a running sum; directions and axes from args.
struct ScanGraph {
  Graph g;
  Node* node;
  ScanGraph(std::vector<int64_t> in_axes, std::vector<int64_t> in_dirs, std::vector<int64_t> out_dirs) {
    Value* s = g.add_input("s", Type::tensor(DType::F32, {2}));
    Value* x = g.add_input("x", Type::tensor_unknown_shape(DType::F32));
    auto body = subgraph(g);
    Value* si = body->add_input("s_in", Type::tensor(DType::F32, {2}));
    Value* xi = body->add_input("x_in", Type::tensor(DType::F32, {2}));
    Node* add = body->add_node("TAdd", {si, xi}, 1);
    add->outputs[0]->type = Type::tensor(DType::F32, {2});
    Node* id = body->add_node("TId", {add->outputs[0]}, 1);
    id->outputs[0]->type = Type::tensor(DType::F32, {2});
    body->outputs = {add->outputs[0], id->outputs[0]};
    auto attrs = graph_attr("body", body);
    attrs["num_scan_inputs"] = Attribute::of_int(1);
    attrs["scan_input_axes"] = Attribute::of_ints(in_axes);
    attrs["scan_input_directions"] = Attribute::of_ints(in_dirs);
    attrs["scan_output_directions"] = Attribute::of_ints(out_dirs);
    node = g.add_node("Scan", {s, x}, 2, attrs);
    g.outputs = node->outputs;
  }
};

TEST(OpsControlScan, ForwardRunningSum) {
  ScanGraph sg({0}, {0}, {0});
  auto out = run(sg.g, {Tensor::from_f32({2}, {0, 0}), Tensor::from_f32({3, 2}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(floats_of(out[0].tensor), (std::vector<float>{9, 12}));
  EXPECT_EQ(floats_of(out[1].tensor), (std::vector<float>{1, 2, 4, 6, 9, 12}));
}

TEST(OpsControlScan, ReverseInputAxisOneAndReversedOutput) {
  // x[2,3] scanned along axis 1 from the back: slices (3,6), (2,5), (1,4).
  ScanGraph sg({-1}, {1}, {1});
  auto out = run(sg.g, {Tensor::from_f32({2}, {0, 0}), Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(floats_of(out[0].tensor), (std::vector<float>{6, 15}));
  // Partial sums (3,6), (5,11), (6,15), stored last-first.
  EXPECT_EQ(floats_of(out[1].tensor), (std::vector<float>{6, 15, 5, 11, 3, 6}));
}

TEST(OpsControlScan, InferUsesTheScanLength) {
  ScanGraph sg({1}, {0}, {0});
  Type s = Type::tensor(DType::F32, {2});
  Type x = Type::tensor(DType::F32, {2, Dim::sym("T")});
  InferContext ctx = infer_node(*sg.node, {&s, &x});
  EXPECT_EQ(ctx.out_types[1], Type::tensor(DType::F32, {Dim::sym("T"), 2}));
}

TEST(OpsControlScan, RejectsBadAxisAndDirection) {
  ScanGraph bad_axis({2}, {0}, {0});
  EXPECT_THROW(run(bad_axis.g, {Tensor::from_f32({2}, {0, 0}), Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6})}),
               Error);
  ScanGraph bad_dir({0}, {2}, {0});
  EXPECT_THROW(run(bad_dir.g, {Tensor::from_f32({2}, {0, 0}), Tensor::from_f32({3, 2}, {1, 2, 3, 4, 5, 6})}), Error);
}

TEST(OpsControlScan, Scan8UpgradeRunsPerBatch) {
  // Scan-8: (sequence_lens="", state[B,2], x[B,T,2]); batch 2, length 2.
  Graph g;
  Value* s = g.add_input("s", Type::tensor(DType::F32, {2, 2}));
  Value* x = g.add_input("x", Type::tensor(DType::F32, {2, 2, 2}));
  auto body = subgraph(g);
  Value* si = body->add_input("s_in", Type::tensor(DType::F32, {2}));
  Value* xi = body->add_input("x_in", Type::tensor(DType::F32, {2}));
  Node* add = body->add_node("TAdd", {si, xi}, 1);
  Node* id = body->add_node("TId", {add->outputs[0]}, 1);
  body->outputs = {add->outputs[0], id->outputs[0]};
  auto attrs = graph_attr("body", body);
  attrs["num_scan_inputs"] = Attribute::of_int(1);
  Node* n = g.add_node("Scan", {nullptr, s, x}, 2, attrs);
  g.outputs = n->outputs;
  test_registry().find("", "Scan")->upgrade(*n, 8);
  auto out = run(g, {Tensor::from_f32({2, 2}, {0, 0, 100, 100}),
                     Tensor::from_f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})});
  EXPECT_EQ(floats_of(out[0].tensor), (std::vector<float>{4, 6, 112, 114}));
  EXPECT_EQ(out[1].tensor.shape(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(floats_of(out[1].tensor), (std::vector<float>{1, 2, 4, 6, 105, 106, 112, 114}));
}

// ---- sequences and optionals -------------------------------------------------------

RtValue run1(const std::string& op, std::vector<RtValue> ins, std::map<std::string, Attribute> attrs = {}) {
  Graph g;
  std::vector<Value*> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input("", Type{}));
  Node* n = g.add_node(op, vs, 1, std::move(attrs));
  g.outputs = n->outputs;
  return run(g, ins)[0];
}

RtValue seq_of(std::vector<Tensor> ts) { return RtValue::sequence(std::move(ts)); }

TEST(OpsControlSequence, InsertAtEraseLength) {
  Tensor a = Tensor::from_f32({1}, {1}), b = Tensor::from_f32({2}, {2, 3}), c = Tensor::from_f32({1}, {4});
  RtValue s = run1("SequenceInsert", {seq_of({a, b}), c, Tensor::scalar_i64(-1)});
  ASSERT_EQ(s.seq.size(), 3u);
  EXPECT_EQ(floats_of(s.seq[1]), (std::vector<float>{4}));  // inserted before the last
  EXPECT_EQ(floats_of(run1("SequenceAt", {s, Tensor::scalar_i64(-1)}).tensor), (std::vector<float>{2, 3}));
  RtValue e = run1("SequenceErase", {s, Tensor::scalar_i64(0)});
  EXPECT_EQ(run1("SequenceLength", {e}).tensor.get_i64(0), 2);
  EXPECT_THROW(run1("SequenceAt", {s, Tensor::scalar_i64(3)}), Error);
  EXPECT_THROW(run1("SequenceAt", {s, Tensor::scalar_i64(-4)}), Error);
  EXPECT_THROW(run1("SequenceInsert", {s, Tensor::scalar_i64(1)}), Error);  // i64 into an f32 sequence
  EXPECT_THROW(run1("SequenceErase", {seq_of({})}), Error);
}

TEST(OpsControlSequence, SplitAndConcat) {
  Tensor x = Tensor::from_f32({5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  RtValue parts = run1("SplitToSequence", {x, Tensor::scalar_i64(2)});
  ASSERT_EQ(parts.seq.size(), 3u);  // 2 + 2 + 1
  EXPECT_EQ(parts.seq[2].shape(), (std::vector<int64_t>{1, 2}));
  RtValue rows = run1("SplitToSequence", {x}, {{"axis", Attribute::of_int(1)}, {"keepdims", Attribute::of_int(0)}});
  ASSERT_EQ(rows.seq.size(), 2u);
  EXPECT_EQ(floats_of(rows.seq[1]), (std::vector<float>{1, 3, 5, 7, 9}));
  EXPECT_THROW(run1("SplitToSequence", {x, Tensor::from_i64({2, 2})}), Error);  // sums to 4, not 5
  RtValue back = run1("ConcatFromSequence", {parts}, {{"axis", Attribute::of_int(0)}});
  EXPECT_TRUE(back.tensor.bitwise_equal(x));
  RtValue st = run1("ConcatFromSequence", {rows}, {{"axis", Attribute::of_int(-1)}, {"new_axis", Attribute::of_int(1)}});
  EXPECT_EQ(st.tensor.shape(), (std::vector<int64_t>{5, 2}));
  EXPECT_TRUE(st.tensor.bitwise_equal(x));
  EXPECT_THROW(run1("ConcatFromSequence", {parts}, {{"axis", Attribute::of_int(2)}}), Error);
}

TEST(OpsControlSequence, Optionals) {
  Tensor x = Tensor::from_f32({1}, {5});
  EXPECT_EQ(run1("OptionalHasElement", {RtValue::none()}).tensor.get_i64(0), 0);
  EXPECT_EQ(run1("OptionalHasElement", {x}).tensor.get_i64(0), 1);
  EXPECT_EQ(floats_of(run1("OptionalGetElement", {x}).tensor), (std::vector<float>{5}));
  EXPECT_THROW(run1("OptionalGetElement", {RtValue::none()}), Error);
}

// ---- operators run through the global registry ------------------------------------

RtValue run_global(const std::string& op, std::vector<RtValue> ins, std::map<std::string, Attribute> attrs = {},
                   size_t outputs = 1, size_t which = 0) {
  Graph g;
  std::vector<Value*> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(ins[i].is_tensor() && !ins[i].tensor.defined() ? nullptr : g.add_input("", Type{}));
  std::vector<RtValue> bound;
  for (auto& v : ins)
    if (!(v.is_tensor() && !v.tensor.defined())) bound.push_back(v);
  Node* n = g.add_node(op, vs, outputs, std::move(attrs));
  g.outputs = n->outputs;
  return Interpreter().run(g, bound)[which];
}

Tensor f32(std::vector<int64_t> shape, std::vector<float> v) { return Tensor::from_f32(std::move(shape), v); }

Tensor strings(std::vector<int64_t> shape, std::vector<std::string> v) {
  Tensor t(DType::String, std::move(shape));
  t.mutable_strings() = std::move(v);
  return t;
}

TEST(OpsControlRnn, SingleStepRnnByHand) {
  // H = tanh(W x + R h0 + Wb + Rb) with 1 hidden unit: tanh(2*1 + 0.5*1 + 0.25) = tanh(2.75).
  auto attrs = std::map<std::string, Attribute>{{"hidden_size", Attribute::of_int(1)}};
  RtValue y = run_global("RNN",
                         {f32({1, 1, 1}, {1}), f32({1, 1, 1}, {2}), f32({1, 1, 1}, {0.5f}), f32({1, 2}, {0.25f, 0}),
                          Tensor(), f32({1, 1, 1}, {1})},
                         attrs, 2, 1);
  EXPECT_NEAR(y.tensor.get_f64(0), std::tanh(2.75), 1e-6);
}

TEST(OpsControlRnn, GruLinearBeforeResetAndSequenceLens) {
  // 1 hidden unit, zero weights except the candidate's recurrence Rh = 1 and
  // its bias Rbh = 1; h0 = 1. z = r = sigmoid(0) = 0.5.
  // linear_before_reset=0: hh = tanh(Rh*(r*h) + Rbh) = tanh(1.5)
  // linear_before_reset=1: hh = tanh(r*(Rh*h + Rbh)) = tanh(1.0)
  // H = (1-z)*hh + z*h0.
  Tensor x = f32({2, 1, 1}, {0, 0});
  Tensor w = f32({1, 3, 1}, {0, 0, 0});
  Tensor r = f32({1, 3, 1}, {0, 0, 1});
  Tensor b = f32({1, 6}, {0, 0, 0, 0, 0, 1});
  Tensor lens(DType::I32, {1});
  lens.set_i64(0, 1);  // only the first step runs
  for (int lbr : {0, 1}) {
    auto attrs = std::map<std::string, Attribute>{{"hidden_size", Attribute::of_int(1)},
                                                  {"linear_before_reset", Attribute::of_int(lbr)}};
    RtValue y = run_global("GRU", {x, w, r, b, lens, f32({1, 1, 1}, {1})}, attrs, 2, 0);
    const double hh = std::tanh(lbr ? 1.0 : 1.5);
    EXPECT_NEAR(y.tensor.get_f64(0), 0.5 * hh + 0.5, 1e-6);
    EXPECT_EQ(y.tensor.get_f64(1), 0.0);  // beyond sequence_lens
  }
}

TEST(OpsControlRnn, RejectsBadInput) {
  auto attrs = std::map<std::string, Attribute>{{"hidden_size", Attribute::of_int(1)}};
  // W has the wrong second dim for an LSTM (4*hidden expected).
  EXPECT_THROW(run_global("LSTM", {f32({1, 1, 1}, {1}), f32({1, 3, 1}, {0, 0, 0}), f32({1, 4, 1}, {0, 0, 0, 0})}, attrs),
               Error);
  Tensor lens(DType::I32, {1});
  lens.set_i64(0, 5);  // longer than the sequence
  EXPECT_THROW(run_global("RNN", {f32({1, 1, 1}, {1}), f32({1, 1, 1}, {1}), f32({1, 1, 1}, {1}), Tensor(), lens}, attrs),
               Error);
  auto bad_dir = attrs;
  bad_dir["direction"] = Attribute::of_string("sideways");
  EXPECT_THROW(run_global("RNN", {f32({1, 1, 1}, {1}), f32({1, 1, 1}, {1}), f32({1, 1, 1}, {1})}, bad_dir), Error);
}

TEST(OpsControlQuantize, RoundsHalfToEvenAndSaturates) {
  Tensor x = f32({6}, {0.5f, 1.5f, 2.5f, -0.5f, 1000, -1000});
  Tensor zp(DType::I8, {});
  zp.set_i64(0, 1);
  RtValue y = run_global("QuantizeLinear", {x, Tensor::scalar_f32(1), zp});
  std::vector<int64_t> got;
  for (int64_t i = 0; i < 6; ++i) got.push_back(y.tensor.get_i64(i));
  // rint: 0, 2, 2, -0 ; +1 ; saturate to [-128, 127]
  EXPECT_EQ(got, (std::vector<int64_t>{1, 3, 3, 1, 127, -128}));
  EXPECT_EQ(y.tensor.dtype(), DType::I8);
}

TEST(OpsControlQuantize, BlockedDequantize) {
  // x [1,5], blocks of 2 along axis 1: scales 1, 10, 100.
  Tensor x(DType::I4, {1, 5});
  for (int64_t i = 0; i < 5; ++i) x.set_i64(i, i - 2);
  auto attrs = std::map<std::string, Attribute>{{"axis", Attribute::of_int(1)}, {"block_size", Attribute::of_int(2)}};
  RtValue y = run_global("DequantizeLinear", {x, f32({1, 3}, {1, 10, 100})}, attrs);
  EXPECT_EQ(floats_of(y.tensor), (std::vector<float>{-2, -1, 0, 10, 200}));
  // Wrong blocked scale shape, and a zero point of another dtype.
  EXPECT_THROW(run_global("DequantizeLinear", {x, f32({1, 2}, {1, 10})}, attrs), Error);
  Tensor zp(DType::U8, {});
  EXPECT_THROW(run_global("DequantizeLinear", {x, Tensor::scalar_f32(1), zp}), Error);
  EXPECT_THROW(run_global("QuantizeLinear", {Tensor::scalar_i64(1), Tensor::scalar_f32(1)}), Error);  // i64 x
}

TEST(OpsControlStrings, SplitFollowsPythonSemantics) {
  auto attrs = std::map<std::string, Attribute>{{"maxsplit", Attribute::of_int(1)}};
  RtValue y = run_global("StringSplit", {strings({2}, {"  a b  c ", ""})}, attrs, 2, 0);
  EXPECT_EQ(y.tensor.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(y.tensor.strings(), (std::vector<std::string>{"a", "b  c ", "", ""}));
  auto dash = std::map<std::string, Attribute>{{"delimiter", Attribute::of_string("--")}};
  RtValue z = run_global("StringSplit", {strings({1}, {"--x----"})}, dash, 2, 0);
  EXPECT_EQ(z.tensor.strings(), (std::vector<std::string>{"", "x", "", ""}));
}

TEST(OpsControlStrings, NormalizerAndRegex) {
  auto attrs = std::map<std::string, Attribute>{{"stopwords", Attribute::of_strings({"the"})},
                                                {"case_change_action", Attribute::of_string("UPPER")}};
  RtValue y = run_global("StringNormalizer", {strings({1, 3}, {"The", "cat", "THE"})}, attrs);
  EXPECT_EQ(y.tensor.shape(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(y.tensor.strings()[0], "CAT");
  auto re = std::map<std::string, Attribute>{{"pattern", Attribute::of_string("(?i)(?P<w>ab)+\\z")}};
  RtValue m = run_global("RegexFullMatch", {strings({3}, {"abAB", "aba", ""})}, re);
  EXPECT_EQ(m.tensor.get_i64(0), 1);
  EXPECT_EQ(m.tensor.get_i64(1), 0);
  EXPECT_EQ(m.tensor.get_i64(2), 0);
  auto lookahead = std::map<std::string, Attribute>{{"pattern", Attribute::of_string("a(?=b)")}};
  EXPECT_THROW(run_global("RegexFullMatch", {strings({1}, {"ab"})}, lookahead), Error);
  auto broken = std::map<std::string, Attribute>{{"pattern", Attribute::of_string("(ab")}};
  EXPECT_THROW(run_global("RegexFullMatch", {strings({1}, {"ab"})}, broken), Error);
  EXPECT_THROW(run_global("StringConcat", {strings({2}, {"a", "b"}), strings({3}, {"a", "b", "c"})}), Error);
}

TEST(OpsControlSignal, DftOfAnImpulseAndRealRoundTrip) {
  // DFT of [1, 0, 0, 0] is all ones; of [0, 1, 0, 0] is [1, -i, -1, i].
  RtValue y = run_global("DFT", {f32({1, 4, 1}, {0, 1, 0, 0})});
  EXPECT_EQ(y.tensor.shape(), (std::vector<int64_t>{1, 4, 2}));
  const std::vector<float> want{1, 0, 0, -1, -1, 0, 0, 1};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y.tensor.get_f64(static_cast<int64_t>(i)), want[i], 1e-6);
  // rfft then irfft gives the signal back.
  Tensor sig = f32({1, 5, 1}, {1, 2, 3, 4, 5});
  RtValue half = run_global("DFT", {sig}, {{"onesided", Attribute::of_int(1)}});
  EXPECT_EQ(half.tensor.shape(), (std::vector<int64_t>{1, 3, 2}));
  RtValue back = run_global("DFT", {half.tensor, Tensor::scalar_i64(5)},
                            {{"onesided", Attribute::of_int(1)}, {"inverse", Attribute::of_int(1)}});
  for (int64_t i = 0; i < 5; ++i) EXPECT_NEAR(back.tensor.get_f64(i), i + 1, 1e-5);
  EXPECT_THROW(run_global("DFT", {sig, Tensor(), Tensor::scalar_i64(2)}), Error);  // the complex axis
}

TEST(OpsControlSignal, Windows) {
  // Symmetric Hann of 3: [0, 1, 0]; periodic Hann of 4: [0, 0.5, 1, 0.5].
  RtValue s = run_global("HannWindow", {Tensor::scalar_i64(3)}, {{"periodic", Attribute::of_int(0)}});
  EXPECT_NEAR(s.tensor.get_f64(1), 1.0, 1e-7);
  EXPECT_NEAR(s.tensor.get_f64(2), 0.0, 1e-7);
  RtValue p = run_global("HannWindow", {Tensor::scalar_i64(4)});
  EXPECT_NEAR(p.tensor.get_f64(1), 0.5, 1e-7);
  EXPECT_THROW(run_global("HannWindow", {Tensor::scalar_f32(4)}), Error);
}

TEST(OpsControlRandom, SeededStreamsMatchNumpyRandomState) {
  // Values from numpy.random.RandomState(seed).rand / randn / binomial(1, p).
  RtValue u = run_global("RandomUniform", {}, {{"shape", Attribute::of_ints({4})}, {"seed", Attribute::of_float(0)},
                                               {"dtype", Attribute::of_int(11)}});
  EXPECT_DOUBLE_EQ(u.tensor.get_f64(0), 0.5488135039273248);
  EXPECT_DOUBLE_EQ(u.tensor.get_f64(3), 0.5448831829968969);
  RtValue g = run_global("RandomNormal", {}, {{"shape", Attribute::of_ints({5})}, {"seed", Attribute::of_float(5)},
                                              {"dtype", Attribute::of_int(11)}});
  EXPECT_NEAR(g.tensor.get_f64(0), 0.44122748688504143, 1e-15);
  EXPECT_NEAR(g.tensor.get_f64(2), 2.43077118700778, 1e-14);
  Tensor p(DType::F64, {8});
  const double ps[] = {0.1, 0.9, 0.5, 0.3, 0.7, 0.99, 0.01, 0.6};
  for (int i = 0; i < 8; ++i) p.set_f64(i, ps[i]);
  RtValue b = run_global("Bernoulli", {p}, {{"seed", Attribute::of_float(3)}});
  std::vector<int64_t> got;
  for (int i = 0; i < 8; ++i) got.push_back(b.tensor.get_i64(i));
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 0, 0, 0, 1, 0, 1}));
  p.set_f64(0, 1.5);
  EXPECT_THROW(run_global("Bernoulli", {p}), Error);
}

TEST(OpsControlImage, DecodesPnmAndRefusesTruncatedOrUnknownData) {
  const std::string pnm = "P6\n# c\n2 1\n255\n\x01\x02\x03\x04\x05\x06";
  Tensor x(DType::U8, {static_cast<int64_t>(pnm.size())});
  for (size_t i = 0; i < pnm.size(); ++i) x.set_i64(static_cast<int64_t>(i), static_cast<unsigned char>(pnm[i]));
  RtValue bgr = run_global("ImageDecoder", {x}, {{"pixel_format", Attribute::of_string("BGR")}});
  EXPECT_EQ(bgr.tensor.shape(), (std::vector<int64_t>{1, 2, 3}));
  std::vector<int64_t> got;
  for (int64_t i = 0; i < 6; ++i) got.push_back(bgr.tensor.get_i64(i));
  EXPECT_EQ(got, (std::vector<int64_t>{3, 2, 1, 6, 5, 4}));
  Tensor cut(DType::U8, {12});  // header only, no samples
  for (int64_t i = 0; i < 12; ++i) cut.set_i64(i, static_cast<unsigned char>(pnm[static_cast<size_t>(i)]));
  EXPECT_THROW(run_global("ImageDecoder", {cut}), Error);
  Tensor png(DType::U8, {8});
  const unsigned char sig[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  for (int64_t i = 0; i < 8; ++i) png.set_i64(i, sig[i]);
  EXPECT_THROW(run_global("ImageDecoder", {png}), Error);
  EXPECT_THROW(run_global("ImageDecoder", {Tensor(DType::U8, {4})}), Error);
  // A JPEG that ends right after its frame header.
  const unsigned char jpg[] = {0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x00, 0x10, 0x00, 0x10, 0x01, 0x01, 0x11, 0x00};
  Tensor j(DType::U8, {static_cast<int64_t>(sizeof(jpg))});
  for (int64_t i = 0; i < j.numel(); ++i) j.set_i64(i, jpg[i]);
  EXPECT_THROW(run_global("ImageDecoder", {j}), Error);
}

}  // namespace
}  // namespace tessel
