// Positive tests of the ONNX importer: models are built in memory with the
// generated protobuf classes and imported from bytes (or from a file in a
// temporary folder when external data is involved).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "onnx.pb.h"
#include "tessel/frontend/onnx/importer.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

onnx::ModelProto make_model(int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("tessel-test");
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

void set_tensor_type(onnx::ValueInfoProto* vi, const std::string& name, int elem, std::vector<std::string> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* sh = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = sh->add_dim();
    if (d == "?") continue;
    if (!d.empty() && (std::isdigit(static_cast<unsigned char>(d[0])) != 0)) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
                          std::vector<std::string> outs, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

std::unique_ptr<Model> import(const onnx::ModelProto& m, const std::string& dir = "") {
  std::string bytes = m.SerializeAsString();
  return import_onnx_bytes(bytes.data(), bytes.size(), dir);
}

// A model whose only output is the initializer `t`: imports without any op.
Tensor roundtrip(const onnx::TensorProto& t) {
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  *g->add_initializer() = t;
  g->mutable_initializer(0)->set_name("c");
  g->add_output()->set_name("c");
  auto model = import(m);
  EXPECT_EQ(model->graph->outputs.size(), 1u);
  EXPECT_TRUE(model->graph->outputs[0]->is_constant());
  return *model->graph->outputs[0]->constant;
}

onnx::TensorProto raw_tensor(int dt, std::vector<int64_t> dims, std::vector<uint8_t> bytes) {
  onnx::TensorProto t;
  t.set_data_type(dt);
  for (auto d : dims) t.add_dims(d);
  t.set_raw_data(std::string(bytes.begin(), bytes.end()));
  return t;
}

onnx::TensorProto int32_tensor(int dt, std::vector<int64_t> dims, std::vector<int32_t> vals) {
  onnx::TensorProto t;
  t.set_data_type(dt);
  for (auto d : dims) t.add_dims(d);
  for (auto v : vals) t.add_int32_data(v);
  return t;
}

template <class T>
std::vector<uint8_t> le_bytes(std::vector<T> v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_f64(i));
  return r;
}

using V = std::vector<double>;

TEST(OnnxImport, Float32RawAndTyped) {
  Tensor a = roundtrip(raw_tensor(onnx::TensorProto::FLOAT, {2}, le_bytes<float>({1.5f, -2.0f})));
  EXPECT_EQ(a.dtype(), DType::F32);
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(values(a), (V{1.5, -2.0}));
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(1);
  t.add_dims(3);
  for (float f : {0.25f, 3.0f, -1.0f}) t.add_float_data(f);
  Tensor b = roundtrip(t);
  EXPECT_EQ(b.shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(values(b), (V{0.25, 3.0, -1.0}));
}

TEST(OnnxImport, Float64AndIntegersTyped) {
  onnx::TensorProto d;
  d.set_data_type(onnx::TensorProto::DOUBLE);
  d.add_dims(2);
  d.add_double_data(1e300);
  d.add_double_data(-0.5);
  EXPECT_EQ(values(roundtrip(d)), (V{1e300, -0.5}));

  onnx::TensorProto i64;
  i64.set_data_type(onnx::TensorProto::INT64);
  i64.add_dims(2);
  i64.add_int64_data(INT64_MIN);
  i64.add_int64_data(7);
  Tensor ti = roundtrip(i64);
  EXPECT_EQ(ti.get_i64(0), INT64_MIN);
  EXPECT_EQ(ti.get_i64(1), 7);

  onnx::TensorProto u64;
  u64.set_data_type(onnx::TensorProto::UINT64);
  u64.add_dims(1);
  u64.add_uint64_data(UINT64_MAX);
  EXPECT_EQ(roundtrip(u64).get_u64(0), UINT64_MAX);

  onnx::TensorProto u32;
  u32.set_data_type(onnx::TensorProto::UINT32);
  u32.add_dims(1);
  u32.add_uint64_data(4000000000u);
  Tensor t32 = roundtrip(u32);
  EXPECT_EQ(t32.dtype(), DType::U32);
  EXPECT_EQ(t32.get_u64(0), 4000000000u);

  EXPECT_EQ(values(roundtrip(int32_tensor(onnx::TensorProto::INT32, {2}, {-5, 1 << 30}))), (V{-5, 1 << 30}));
  EXPECT_EQ(values(roundtrip(int32_tensor(onnx::TensorProto::INT16, {2}, {-300, 300}))), (V{-300, 300}));
  EXPECT_EQ(values(roundtrip(int32_tensor(onnx::TensorProto::UINT16, {1}, {65535}))), (V{65535}));
  EXPECT_EQ(values(roundtrip(int32_tensor(onnx::TensorProto::INT8, {2}, {-128, 127}))), (V{-128, 127}));
  EXPECT_EQ(values(roundtrip(int32_tensor(onnx::TensorProto::UINT8, {2}, {0, 255}))), (V{0, 255}));
  Tensor b = roundtrip(int32_tensor(onnx::TensorProto::BOOL, {3}, {1, 0, 1}));
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(values(b), (V{1, 0, 1}));
}

TEST(OnnxImport, IntegersRaw) {
  EXPECT_EQ(values(roundtrip(raw_tensor(onnx::TensorProto::INT8, {3}, {0xff, 0x80, 0x7f}))), (V{-1, -128, 127}));
  EXPECT_EQ(values(roundtrip(raw_tensor(onnx::TensorProto::UINT8, {2}, {0xff, 0x01}))), (V{255, 1}));
  EXPECT_EQ(values(roundtrip(raw_tensor(onnx::TensorProto::INT16, {1}, le_bytes<int16_t>({-2})))), (V{-2}));
  EXPECT_EQ(values(roundtrip(raw_tensor(onnx::TensorProto::UINT16, {1}, le_bytes<uint16_t>({60000})))), (V{60000}));
  EXPECT_EQ(values(roundtrip(raw_tensor(onnx::TensorProto::INT32, {2}, le_bytes<int32_t>({-7, 9})))), (V{-7, 9}));
  Tensor i64 = roundtrip(raw_tensor(onnx::TensorProto::INT64, {1}, le_bytes<int64_t>({-(int64_t{1} << 40)})));
  EXPECT_EQ(i64.get_i64(0), -(int64_t{1} << 40));
  EXPECT_EQ(roundtrip(raw_tensor(onnx::TensorProto::UINT32, {1}, le_bytes<uint32_t>({4000000000u}))).get_u64(0),
            4000000000u);
  EXPECT_EQ(roundtrip(raw_tensor(onnx::TensorProto::UINT64, {1}, le_bytes<uint64_t>({UINT64_MAX}))).get_u64(0),
            UINT64_MAX);
  // Bool bytes other than 0/1 normalise to 1.
  EXPECT_EQ(values(roundtrip(raw_tensor(onnx::TensorProto::BOOL, {3}, {0, 1, 2}))), (V{0, 1, 1}));
  // Empty tensors need no data.
  Tensor e = roundtrip(raw_tensor(onnx::TensorProto::FLOAT, {0, 3}, {}));
  EXPECT_EQ(e.numel(), 0);
}

TEST(OnnxImport, HalfAndBFloat16) {
  Tensor h = roundtrip(int32_tensor(onnx::TensorProto::FLOAT16, {2}, {0x3C00, 0xC000}));
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(h.data<uint16_t>()[0], 0x3C00);
  EXPECT_EQ(values(h), (V{1.0, -2.0}));
  EXPECT_EQ(values(roundtrip(raw_tensor(onnx::TensorProto::FLOAT16, {1}, le_bytes<uint16_t>({0x3800})))), (V{0.5}));
  Tensor b = roundtrip(raw_tensor(onnx::TensorProto::BFLOAT16, {2}, le_bytes<uint16_t>({0x3F80, 0xC040})));
  EXPECT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(b.data<uint16_t>()[1], 0xC040);
  EXPECT_EQ(values(b), (V{1.0, -3.0}));
  EXPECT_EQ(values(roundtrip(int32_tensor(onnx::TensorProto::BFLOAT16, {1}, {16256}))), (V{1.0}));
}

TEST(OnnxImport, Float8Bits) {
  // Bit patterns as onnx.helper.make_tensor writes them.
  Tensor a = roundtrip(int32_tensor(17 /*FLOAT8E4M3FN*/, {2}, {56, 64}));
  EXPECT_EQ(a.dtype(), DType::F8E4M3FN);
  EXPECT_EQ(a.raw()[0], 56);
  EXPECT_EQ(values(a), (V{1.0, 2.0}));
  Tensor b = roundtrip(raw_tensor(19 /*FLOAT8E5M2*/, {2}, {0x3C, 0xC0}));
  EXPECT_EQ(b.dtype(), DType::F8E5M2);
  EXPECT_EQ(values(b), (V{1.0, -2.0}));
  Tensor c = roundtrip(raw_tensor(18 /*FLOAT8E4M3FNUZ*/, {1}, {0x40}));
  EXPECT_EQ(c.dtype(), DType::F8E4M3FNUZ);
  EXPECT_EQ(c.raw()[0], 0x40);
  EXPECT_EQ(roundtrip(raw_tensor(20 /*FLOAT8E5M2FNUZ*/, {1}, {0x40})).dtype(), DType::F8E5M2FNUZ);
  Tensor e = roundtrip(int32_tensor(24 /*FLOAT8E8M0*/, {2}, {127, 128}));
  EXPECT_EQ(e.dtype(), DType::F8E8M0);
  EXPECT_EQ(values(e), (V{1.0, 2.0}));
}

TEST(OnnxImport, SubByteUnpacking) {
  // int4 [1, -2, 3]: packed low nibble first -> 0xE1, 0x03.
  Tensor i4 = roundtrip(raw_tensor(22 /*INT4*/, {3}, {0xE1, 0x03}));
  EXPECT_EQ(i4.dtype(), DType::I4);
  EXPECT_EQ(i4.numel(), 3);
  EXPECT_EQ(values(i4), (V{1, -2, 3}));
  EXPECT_EQ(i4.data<int8_t>()[1], -2);  // sign-extended in storage
  EXPECT_EQ(values(roundtrip(int32_tensor(22, {3}, {225, 3}))), (V{1, -2, 3}));
  EXPECT_EQ(values(roundtrip(raw_tensor(21 /*UINT4*/, {4}, {0xE1, 0xF3}))), (V{1, 14, 3, 15}));
  // int2 [1, -2, 1, 0, -1]: 4 per byte, low bits first -> 25, 3.
  Tensor i2 = roundtrip(raw_tensor(26 /*INT2*/, {5}, {25, 3}));
  EXPECT_EQ(i2.dtype(), DType::I2);
  EXPECT_EQ(values(i2), (V{1, -2, 1, 0, -1}));
  EXPECT_EQ(values(roundtrip(int32_tensor(26, {5}, {25, 3}))), (V{1, -2, 1, 0, -1}));
  EXPECT_EQ(values(roundtrip(raw_tensor(25 /*UINT2*/, {5}, {25, 3}))), (V{1, 2, 1, 0, 3}));
  // float4e2m1 [1.0, -2.0, 0.5] -> 0xC2, 0x01.
  Tensor f4 = roundtrip(raw_tensor(23 /*FLOAT4E2M1*/, {3}, {0xC2, 0x01}));
  EXPECT_EQ(f4.dtype(), DType::F4E2M1);
  EXPECT_EQ(f4.raw()[0], 0x2);
  EXPECT_EQ(f4.raw()[1], 0xC);
  EXPECT_EQ(values(f4), (V{1.0, -2.0, 0.5}));
}

TEST(OnnxImport, Strings) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::STRING);
  t.add_dims(2);
  t.add_string_data("hello");
  t.add_string_data(std::string("a\0b", 3));
  Tensor s = roundtrip(t);
  EXPECT_EQ(s.dtype(), DType::String);
  ASSERT_EQ(s.strings().size(), 2u);
  EXPECT_EQ(s.strings()[0], "hello");
  EXPECT_EQ(s.strings()[1], std::string("a\0b", 3));
}

TEST(OnnxImport, GraphInputsOutputsAndSymbolicDims) {
  onnx::ModelProto m = make_model(13);
  auto* md = m.add_metadata_props();
  md->set_key("author");
  md->set_value("me");
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {"batch", "3", "?"});
  set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {"batch", "3", "?"});
  // Nodes out of order: the importer sorts them.
  add_node(g, "Identity", {"t"}, {"y"}, "second");
  add_node(g, "Identity", {"x"}, {"t"}, "first");
  auto model = import(m);
  EXPECT_EQ(model->ir_version, 8);
  EXPECT_EQ(model->producer_name, "tessel-test");
  EXPECT_EQ(model->metadata.at("author"), "me");
  EXPECT_EQ(model->opsets.at(""), 13);
  Graph& gr = *model->graph;
  ASSERT_EQ(gr.inputs.size(), 1u);
  EXPECT_EQ(gr.inputs[0]->name, "x");
  EXPECT_EQ(gr.inputs[0]->type.dtype, DType::F32);
  const Shape& s = *gr.inputs[0]->type.shape;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], Dim::sym("batch"));
  EXPECT_EQ(s[1], Dim(3));
  EXPECT_EQ(s[2].str().rfind("unk__", 0), 0u) << s[2].str();
  // A second missing dim gets a different symbol.
  EXPECT_NE((*gr.outputs[0]->type.shape)[2], s[2]);
  ASSERT_EQ(gr.nodes().size(), 2u);
  EXPECT_EQ(gr.nodes().front()->name, "first");
  EXPECT_EQ(gr.nodes().front()->inputs[0], gr.inputs[0]);
  EXPECT_EQ(gr.outputs[0]->name, "y");
  EXPECT_EQ(gr.outputs[0]->producer, gr.nodes().back().get());
}

TEST(OnnxImport, InputWithInitializerBecomesConstant) {
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
  set_tensor_type(g->add_input(), "w", onnx::TensorProto::FLOAT, {"2"});
  *g->add_initializer() = raw_tensor(onnx::TensorProto::FLOAT, {2}, le_bytes<float>({1, 2}));
  g->mutable_initializer(0)->set_name("w");
  set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2"});
  add_node(g, "Identity", {"w"}, {"y"});
  auto model = import(m);
  ASSERT_EQ(model->graph->inputs.size(), 1u);
  EXPECT_EQ(model->graph->inputs[0]->name, "x");
  ASSERT_EQ(model->graph->initializers.size(), 1u);
  EXPECT_EQ(model->graph->nodes().front()->inputs[0], model->graph->initializers[0]);
}

TEST(OnnxImport, AttributesOfEveryKind) {
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {"1"});
  auto* n = add_node(g, "Constant", {}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = raw_tensor(onnx::TensorProto::FLOAT, {1}, le_bytes<float>({4.0f}));
  auto model = import(m);
  const Node& c = *model->graph->nodes().front();
  EXPECT_EQ(values(c.attr_tensor("value")), (V{4.0}));

  // Every kind, checked on an Identity node (the importer does not validate
  // attribute names; ops do).
  onnx::ModelProto m2 = make_model();
  auto* g2 = m2.mutable_graph();
  set_tensor_type(g2->add_input(), "x", onnx::TensorProto::FLOAT, {"1"});
  set_tensor_type(g2->add_output(), "y", onnx::TensorProto::FLOAT, {"1"});
  auto* id = add_node(g2, "Identity", {"x"}, {"y"});
  auto attr = [&](const char* name, onnx::AttributeProto::AttributeType t) {
    auto* at = id->add_attribute();
    at->set_name(name);
    at->set_type(t);
    return at;
  };
  attr("i", onnx::AttributeProto::INT)->set_i(-3);
  attr("f", onnx::AttributeProto::FLOAT)->set_f(0.5f);
  attr("s", onnx::AttributeProto::STRING)->set_s("abc");
  auto* is = attr("is", onnx::AttributeProto::INTS);
  is->add_ints(1);
  is->add_ints(2);
  attr("fs", onnx::AttributeProto::FLOATS)->add_floats(1.5f);
  attr("ss", onnx::AttributeProto::STRINGS)->add_strings("q");
  *attr("ts", onnx::AttributeProto::TENSORS)->add_tensors() = int32_tensor(onnx::TensorProto::INT32, {1}, {5});
  auto* sp = attr("sp", onnx::AttributeProto::SPARSE_TENSOR)->mutable_sparse_tensor();
  sp->add_dims(2);
  sp->add_dims(3);
  *sp->mutable_values() = raw_tensor(onnx::TensorProto::FLOAT, {2}, le_bytes<float>({7, 8}));
  *sp->mutable_indices() = raw_tensor(onnx::TensorProto::INT64, {2}, le_bytes<int64_t>({1, 5}));
  auto* tp = attr("tp", onnx::AttributeProto::TYPE_PROTO)->mutable_tp();
  tp->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  auto* gg = attr("g", onnx::AttributeProto::GRAPH)->mutable_g();
  set_tensor_type(gg->add_output(), "x", onnx::TensorProto::FLOAT, {"1"});
  auto* gs = attr("gs", onnx::AttributeProto::GRAPHS);
  set_tensor_type(gs->add_graphs()->add_output(), "x", onnx::TensorProto::FLOAT, {"1"});
  auto model2 = import(m2);
  const Node& n2 = *model2->graph->nodes().front();
  EXPECT_EQ(n2.attr_int("i", 0), -3);
  EXPECT_EQ(n2.attr_float("f", 0), 0.5f);
  EXPECT_EQ(n2.attr_string("s", ""), "abc");
  EXPECT_EQ(n2.attr_ints("is"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n2.attr_floats("fs"), (std::vector<float>{1.5f}));
  EXPECT_EQ(n2.attr_strings("ss"), (std::vector<std::string>{"q"}));
  EXPECT_EQ(n2.attrs.at("ts").tensors.size(), 1u);
  EXPECT_EQ(values(n2.attr_tensor("sp")), (V{0, 7, 0, 0, 0, 8}));
  EXPECT_EQ(n2.attrs.at("tp").kind, Attribute::Kind::TypeProto);
  EXPECT_EQ(n2.attrs.at("tp").type.dtype, DType::I64);
  // The subgraph's output is the outer `x`, copied by an Identity.
  Graph& sg = n2.attr_graph("g");
  EXPECT_EQ(sg.parent, model2->graph.get());
  ASSERT_EQ(sg.nodes().size(), 1u);
  EXPECT_EQ(sg.nodes().front()->inputs[0], model2->graph->inputs[0]);
  EXPECT_EQ(n2.attrs.at("gs").graphs.size(), 1u);
}

onnx::GraphProto branch(const std::string& name, const std::string& in, const std::string& out) {
  onnx::GraphProto b;
  b.set_name(name);
  add_node(&b, "Identity", {in}, {out});
  set_tensor_type(b.add_output(), out, onnx::TensorProto::FLOAT, {"2"});
  return b;
}

TEST(OnnxImport, NestedGraphReferencesOuterValues) {
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "cond", onnx::TensorProto::BOOL, {});
  set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
  set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2"});
  add_node(g, "Identity", {"x"}, {"x2"});
  auto* n = add_node(g, "If", {"cond"}, {"y"});
  auto* th = n->add_attribute();
  th->set_name("then_branch");
  th->set_type(onnx::AttributeProto::GRAPH);
  *th->mutable_g() = branch("then", "x", "t");
  // The else branch uses the same inner name `t` and an outer value that is
  // defined by a node after the If in the file order.
  auto* el = n->add_attribute();
  el->set_name("else_branch");
  el->set_type(onnx::AttributeProto::GRAPH);
  *el->mutable_g() = branch("else", "x3", "t");
  add_node(g, "Identity", {"x2"}, {"x3"});
  auto model = import(m);
  Graph& gr = *model->graph;
  ASSERT_EQ(gr.nodes().size(), 3u);
  const Node& iff = *gr.nodes().back();  // sorted after the producer of x3
  EXPECT_EQ(iff.op, "If");
  Graph& then_g = iff.attr_graph("then_branch");
  Graph& else_g = iff.attr_graph("else_branch");
  EXPECT_EQ(then_g.parent, &gr);
  EXPECT_EQ(then_g.nodes().front()->inputs[0], gr.inputs[1]);
  EXPECT_EQ(else_g.nodes().front()->inputs[0]->name, "x3");
  EXPECT_EQ(else_g.nodes().front()->inputs[0]->owner, &gr);
  // Names stay unique in the model.
  EXPECT_NE(then_g.outputs[0]->name, else_g.outputs[0]->name);
}

// Function `local.Twice(a) -> (b)`: b = Identity(Identity(a)), plus a
// Constant whose value_float references the attribute `alpha`.
void add_function(onnx::ModelProto* m) {
  auto* f = m->add_functions();
  f->set_name("Twice");
  f->set_domain("local");
  f->add_input("a");
  f->add_output("b");
  f->add_output("c");
  f->add_attribute("alpha");
  auto* os = f->add_opset_import();
  os->set_domain("");
  os->set_version(17);
  auto* n1 = f->add_node();
  n1->set_op_type("Identity");
  n1->add_input("a");
  n1->add_output("tmp");
  auto* n2 = f->add_node();
  n2->set_op_type("Identity");
  n2->add_input("tmp");
  n2->add_output("b");
  auto* n3 = f->add_node();
  n3->set_op_type("Constant");
  n3->add_output("c");
  auto* ra = n3->add_attribute();
  ra->set_name("value_float");
  ra->set_type(onnx::AttributeProto::FLOAT);
  ra->set_ref_attr_name("alpha");
  // Outer(a) -> (b) = Twice(a) twice: nested call.
  auto* g = m->add_functions();
  g->set_name("Outer");
  g->set_domain("local");
  g->add_input("a");
  g->add_output("b");
  auto* c1 = g->add_node();
  c1->set_op_type("Twice");
  c1->set_domain("local");
  c1->add_input("a");
  c1->add_output("m");
  auto* al = c1->add_attribute();
  al->set_name("alpha");
  al->set_type(onnx::AttributeProto::FLOAT);
  al->set_f(1.0f);
  auto* c2 = g->add_node();
  c2->set_op_type("Twice");
  c2->set_domain("local");
  c2->add_input("m");
  c2->add_output("b");
}

TEST(OnnxImport, FunctionInlining) {
  onnx::ModelProto m = make_model();
  auto* os = m.add_opset_import();
  os->set_domain("local");
  os->set_version(1);
  add_function(&m);
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2"});
  set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2"});
  set_tensor_type(g->add_output(), "z", onnx::TensorProto::FLOAT, {"2"});
  auto* call = add_node(g, "Twice", {"x"}, {"y", "k"});
  call->set_domain("local");
  auto* al = call->add_attribute();
  al->set_name("alpha");
  al->set_type(onnx::AttributeProto::FLOAT);
  al->set_f(2.5f);
  auto* call2 = add_node(g, "Outer", {"y"}, {"z"});
  call2->set_domain("local");
  auto model = import(m);
  Graph& gr = *model->graph;
  // Twice = 3 nodes; Outer = 2 x Twice = 6 nodes.
  ASSERT_EQ(gr.nodes().size(), 9u);
  std::set<std::string> names;
  int constants = 0;
  for (auto& n : gr.nodes()) {
    EXPECT_NE(n->op, "Twice");
    for (Value* o : n->outputs) EXPECT_TRUE(names.insert(o->name).second) << o->name;
    if (n->op == "Constant") {
      ++constants;
      if (n->has_attr("value_float")) {
        float v = n->attr_float("value_float", 0);
        EXPECT_TRUE(v == 2.5f || v == 1.0f) << v;
      }
    }
  }
  EXPECT_EQ(constants, 3);
  EXPECT_EQ(gr.nodes().front()->inputs[0], gr.inputs[0]);
  EXPECT_EQ(gr.outputs[0]->name, "y");
  EXPECT_EQ(gr.outputs[1]->name, "z");
  EXPECT_EQ(gr.outputs[1]->producer->op, "Identity");
}

TEST(OnnxImport, ExternalDataInsideFolder) {
  fs::path dir = fs::temp_directory_path() / ("tessel_ext_ok_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "weights");
  {
    std::ofstream f(dir / "weights" / "w.bin", std::ios::binary);
    std::vector<float> junk = {9, 9};
    std::vector<float> w = {1.0f, 2.0f, 3.0f};
    f.write(reinterpret_cast<const char*>(junk.data()), 8);
    f.write(reinterpret_cast<const char*>(w.data()), 12);
  }
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  auto* t = g->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(3);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const char* v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "./weights/w.bin");
  kv("offset", "8");
  kv("length", "12");
  g->add_output()->set_name("w");
  {
    std::ofstream f(dir / "model.onnx", std::ios::binary);
    f << m.SerializeAsString();
  }
  auto model = import_onnx_file((dir / "model.onnx").string());
  EXPECT_EQ(model->source_path, (dir / "model.onnx").string());
  EXPECT_EQ(values(*model->graph->outputs[0]->constant), (V{1, 2, 3}));
  // Without length: the rest of the file.
  t->mutable_external_data()->RemoveLast();
  {
    std::ofstream f(dir / "model.onnx", std::ios::binary);
    f << m.SerializeAsString();
  }
  EXPECT_EQ(values(*import_onnx_file((dir / "model.onnx").string())->graph->outputs[0]->constant), (V{1, 2, 3}));
  fs::remove_all(dir);
}

TEST(OnnxImport, TensorPbFile) {
  fs::path p = fs::temp_directory_path() / ("tessel_tensor_" + std::to_string(::getpid()) + ".pb");
  onnx::TensorProto t = raw_tensor(onnx::TensorProto::INT64, {2}, le_bytes<int64_t>({3, -4}));
  t.set_name("input_0");
  {
    std::ofstream f(p, std::ios::binary);
    f << t.SerializeAsString();
  }
  Tensor r = read_tensor_pb_file(p.string());
  EXPECT_EQ(r.get_i64(0), 3);
  EXPECT_EQ(r.get_i64(1), -4);
  fs::remove(p);
}

// Imports the generated node-test models, when they exist, and counts them.
// Failures other than unknown operators (ops still being written) are
// reported.
TEST(OnnxImport, NodeTestModels) {
  const char* dir = std::getenv("TESSEL_NODE_TESTS_DIR");
  if (!dir) GTEST_SKIP() << "set TESSEL_NODE_TESTS_DIR to the generated node tests";
  fs::path root = dir;
  ASSERT_TRUE(fs::exists(root)) << "no node tests at " << root;
  int total = 0, ok = 0, unknown_op = 0;
  std::vector<std::string> other;
  for (const auto& e : fs::directory_iterator(root)) {
    fs::path model = e.path() / "model.onnx";
    if (!fs::exists(model)) continue;
    ++total;
    try {
      import_onnx_file(model.string());
      ++ok;
    } catch (const Error& err) {
      std::string w = err.what();
      if (w.rfind("unknown operator", 0) == 0) ++unknown_op;
      else other.push_back(e.path().filename().string() + ": " + w);
    }
  }
  std::cout << "node test models: " << ok << "/" << total << " import, " << unknown_op << " unknown operator, "
            << other.size() << " other errors\n";
  for (const auto& o : other) std::cout << "  " << o << "\n";
}

}  // namespace
}  // namespace tessel
