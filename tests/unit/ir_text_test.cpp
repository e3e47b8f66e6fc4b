// Round trips of the IR text form (printer + parser) and parse errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "tessel/frontend/onnx/importer.h"
#include "tessel/interp/interpreter.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/parser.h"
#include "tessel/ir/printer.h"
#include "tessel/ops/registry.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

// Parses `text`, prints it again and checks that the text is unchanged.
void expect_fixed_point(const std::string& text) {
  std::unique_ptr<Model> m = parse_model(text);
  EXPECT_EQ(print_model(*m), text);
}

std::string round_trip(const Model& m) {
  const std::string a = print_model(m);
  std::unique_ptr<Model> p;
  try {
    p = parse_model(a);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what() << "\n" << a;
    return a;
  }
  const std::string b = print_model(*p);
  EXPECT_EQ(a, b);
  return a;
}

Tensor filled(DType dt, std::vector<int64_t> shape, int seed) {
  Tensor t(dt, std::move(shape));
  if (dt == DType::String) {
    for (int64_t i = 0; i < t.numel(); ++i) t.mutable_strings()[static_cast<size_t>(i)] = "s" + std::to_string(i * seed);
    return t;
  }
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (is_float(dt)) {
      t.set_f64(i, (static_cast<double>((i * 7 + seed) % 13) - 6.0) * 0.375);
    } else if (dt == DType::Bool) {
      t.set_i64(i, (i + seed) % 2);
    } else if (is_signed_int(dt)) {
      t.set_i64(i, ((i * 5 + seed) % 4) - 2);
    } else {
      t.set_u64(i, static_cast<uint64_t>((i * 3 + seed) % 4));
    }
  }
  return t;
}

const DType kAllDTypes[] = {DType::F32,        DType::U8,     DType::I8,         DType::U16,    DType::I16,
                            DType::I32,        DType::I64,    DType::String,     DType::Bool,   DType::F16,
                            DType::F64,        DType::U32,    DType::U64,        DType::BF16,   DType::F8E4M3FN,
                            DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ, DType::U4,     DType::I4,
                            DType::F4E2M1,     DType::F8E8M0, DType::U2,         DType::I2};

TEST(IrText, ConstantsOfEveryDTypeRoundTripBitExactly) {
  Model m;
  GraphBuilder b(m);
  std::vector<std::pair<std::string, Tensor>> want;
  for (DType dt : kAllDTypes) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{40}}) {
      std::string name = str_cat("c_", dtype_name(dt), "_", n);
      Tensor t = filled(dt, n == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{n}, static_cast<int>(n));
      b.constant(t, name);
      want.emplace_back(name, t);
    }
  }
  Value* x = b.input("x", DType::F32, {2});
  b.output(x);
  std::string text = round_trip(m);
  auto p = parse_model(text);
  for (const auto& [name, t] : want) {
    Value* v = p->graph->find_value(name);
    ASSERT_TRUE(v && v->constant) << name;
    EXPECT_TRUE(v->constant->bitwise_equal(t)) << name;
    EXPECT_EQ(v->type, Type::tensor(t.dtype(), shape_of(t.shape()))) << name;
  }
}

TEST(IrText, SpecialFloatsKeepTheirBits) {
  Model m;
  GraphBuilder b(m);
  Tensor f(DType::F32, {8});
  const uint32_t bits[] = {0x7fc00000u, 0xffc00000u, 0x7fc00001u, 0x80000000u,
                           0x7f800000u, 0xff800000u, 0x00000001u, 0x3dcccccdu};
  std::memcpy(f.mutable_raw(), bits, sizeof bits);
  b.constant(f, "f");
  Tensor d(DType::F64, {3});
  d.mutable_data<double>()[0] = 0.1;
  d.mutable_data<double>()[1] = -0.0;
  d.mutable_data<double>()[2] = 1e300;
  b.constant(d, "d");
  Tensor h(DType::F16, {4});
  const uint16_t hb[] = {0x7e01, 0x8000, 0x0001, 0x3c00};
  std::memcpy(h.mutable_raw(), hb, sizeof hb);
  b.constant(h, "h");
  b.output(b.graph().find_value("f"));
  std::string text = round_trip(m);
  EXPECT_NE(text.find("0.1"), std::string::npos) << text;  // shortest form, not 0.100000001
  auto p = parse_model(text);
  EXPECT_TRUE(p->graph->find_value("f")->constant->bitwise_equal(f));
  EXPECT_TRUE(p->graph->find_value("d")->constant->bitwise_equal(d));
  EXPECT_TRUE(p->graph->find_value("h")->constant->bitwise_equal(h));
}

TEST(IrText, EveryAttributeKindRoundTrips) {
  Model m;
  m.opsets["com.microsoft"] = 1;
  m.ir_version = 9;
  m.producer_name = "pytorch \"2.1\"";
  m.metadata["k e y"] = "v\nalue";
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {Dim::sym("batch"), 3});
  Attrs attrs;
  attrs["i"] = Attribute::of_int(-7);
  attrs["f"] = Attribute::of_float(1.0f);
  attrs["f2"] = Attribute::of_float(1e-5f);
  attrs["f3"] = Attribute::of_float(-std::numeric_limits<float>::infinity());
  attrs["f4"] = Attribute::of_float(std::nanf(""));
  attrs["s"] = Attribute::of_string("tab\there \"quoted\" \\ back \x01");
  attrs["ints"] = Attribute::of_ints({1, -2, 3});
  attrs["floats"] = Attribute::of_floats({1.0f, 2.5f, 0.1f});
  attrs["strings"] = Attribute::of_strings({"a", "", "c,d"});
  attrs["empty_ints"] = Attribute::of_ints({});
  attrs["empty_floats"] = Attribute::of_floats({});
  attrs["empty_strings"] = Attribute::of_strings({});
  attrs["t"] = Attribute::of_tensor(filled(DType::I64, {2, 2}, 3));
  Attribute ts;
  ts.kind = Attribute::Kind::Tensors;
  ts.tensors = {filled(DType::F16, {3}, 1), filled(DType::String, {2}, 2)};
  attrs["ts"] = ts;
  Attribute ets;
  ets.kind = Attribute::Kind::Tensors;
  attrs["empty_tensors"] = ets;
  Attribute ty;
  ty.kind = Attribute::Kind::TypeProto;
  ty.type = Type::sequence(Type::tensor(DType::F32, {Dim::sym("n"), 4}));
  attrs["type"] = ty;
  Attribute gs;
  gs.kind = Attribute::Kind::Graphs;
  for (int k = 0; k < 2; ++k) {
    auto sg = b.subgraph(str_cat("body", k));
    GraphBuilder sb(*sg);
    Value* si = sb.input(str_cat("si", k), DType::F32, {3});
    sb.output(sb.op("Relu", {si}));
    gs.graphs.push_back(sg);
  }
  attrs["gs"] = gs;
  Attribute egs;
  egs.kind = Attribute::Kind::Graphs;
  attrs["empty_graphs"] = egs;
  attrs["weird name"] = Attribute::of_int(1);
  Value* y = b.op("Custom", {x}, attrs, "com.microsoft");
  b.last_node()->name = "node/with:odd name";
  b.output(y);
  std::string text = round_trip(m);
  auto p = parse_model(text);
  const Node& n = *p->graph->nodes().front();
  EXPECT_EQ(n.domain, "com.microsoft");
  EXPECT_EQ(n.name, "node/with:odd name");
  EXPECT_EQ(n.attrs.at("i").i, -7);
  EXPECT_EQ(n.attrs.at("f").kind, Attribute::Kind::Float);
  EXPECT_EQ(n.attrs.at("f").f, 1.0f);
  EXPECT_EQ(n.attrs.at("f2").f, 1e-5f);
  EXPECT_TRUE(std::isnan(n.attrs.at("f4").f));
  EXPECT_EQ(n.attrs.at("s").s, attrs["s"].s);
  EXPECT_EQ(n.attrs.at("floats").floats, attrs["floats"].floats);
  EXPECT_EQ(n.attrs.at("strings").strings, attrs["strings"].strings);
  EXPECT_EQ(n.attrs.at("empty_floats").kind, Attribute::Kind::Floats);
  EXPECT_EQ(n.attrs.at("empty_strings").kind, Attribute::Kind::Strings);
  EXPECT_EQ(n.attrs.at("empty_tensors").kind, Attribute::Kind::Tensors);
  EXPECT_EQ(n.attrs.at("empty_graphs").kind, Attribute::Kind::Graphs);
  EXPECT_TRUE(n.attrs.at("t").t.bitwise_equal(attrs["t"].t));
  EXPECT_TRUE(n.attrs.at("ts").tensors[1].bitwise_equal(ts.tensors[1]));
  EXPECT_EQ(n.attrs.at("type").type, ty.type);
  ASSERT_EQ(n.attrs.at("gs").graphs.size(), 2u);
  EXPECT_EQ(n.attrs.at("gs").graphs[1]->parent, p->graph.get());
  EXPECT_EQ(p->opsets.at("com.microsoft"), 1);
  EXPECT_EQ(p->ir_version, 9);
  EXPECT_EQ(p->producer_name, m.producer_name);
  EXPECT_EQ(p->metadata, m.metadata);
}

TEST(IrText, OddNamesTypesAndOmittedValues) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("input with spaces/and:colons", DType::F32, {Dim::sym("batch"), Dim::sym("odd sym"), 3});
  Value* s = b.input("seq", Type::sequence(Type::tensor(DType::I64, {Dim::sym("n")})));
  Value* o = b.input("opt", Type::optional(Type::tensor_unknown_shape(DType::F16)));
  Value* u = b.input("unknown", Type{});
  Value* q = b.input("\"quoted\"\n", Type::tensor(DType::Undefined, {2, Dim::floordiv(Dim::sym("seq"), 2) + 1}));
  Value* e = b.input("1", DType::BF16, {Dim::sym("a") * Dim::sym("b") * 2 + Dim::max(Dim::sym("a"), 3)});
  auto outs = b.ops_named("Split", {x, nullptr, s, o, u, q, e}, {"a", "-", "%c"});
  GraphBuilder::typed(outs[0], Type::tensor(DType::F32, {Dim::sym("batch"), 2}));
  auto z = b.ops("NoOut", {outs[0]}, 0);
  EXPECT_TRUE(z.empty());
  b.output(outs[0]);
  b.output(outs[2]);
  b.output(x);
  std::string text = round_trip(m);
  EXPECT_NE(text.find("%\"input with spaces/and:colons\""), std::string::npos) << text;
  EXPECT_NE(text.find("%a, _, %\"%c\" = Split("), std::string::npos) << text;
  auto p = parse_model(text);
  const Node& n = *p->graph->nodes().front();
  ASSERT_EQ(n.inputs.size(), 7u);
  EXPECT_EQ(n.inputs[1], nullptr);
  EXPECT_EQ(n.outputs[1], nullptr);
  EXPECT_EQ(p->graph->inputs[1]->type, s->type);
  EXPECT_EQ(p->graph->inputs[2]->type, o->type);
  EXPECT_EQ(p->graph->inputs[3]->type, u->type);
  EXPECT_EQ(p->graph->inputs[4]->type, q->type);
  EXPECT_EQ(p->graph->inputs[4]->name, q->name);
  EXPECT_EQ(p->graph->inputs[5]->type, e->type);
  EXPECT_EQ(p->graph->nodes().back()->outputs.size(), 0u);
}

TEST(IrText, NestedGraphsSeeOuterValues) {
  const std::string text =
      "tessel.model opset(ai.onnx=17) {\n"
      "graph @main(%c: bool[], %x: f32[2]) -> (%y: f32[2]) {\n"
      "  %k = const f32[2] dense<[1, 2]>\n"
      "  %y = If(%c) {else_branch = graph @else() -> (%e: f32[2]) {\n"
      "      %e = Neg(%x) : f32[2]\n"
      "      return %e\n"
      "    }, then_branch = graph @then() -> (%t: f32[2]) {\n"
      "      %t = Add(%x, %k) : f32[2]\n"
      "      return %t\n"
      "    }} : f32[2]\n"
      "  return %y\n"
      "}\n"
      "}\n";
  expect_fixed_point(text);
  auto m = parse_model(text);
  const Node& iff = *m->graph->nodes().front();
  Graph& then_g = iff.attr_graph("then_branch");
  EXPECT_EQ(then_g.nodes().front()->inputs[0], m->graph->inputs[1]);
  EXPECT_EQ(then_g.nodes().front()->inputs[1], m->graph->initializers[0]);
}

TEST(IrText, InputDefaultsAndComments) {
  const std::string text =
      "// leading comment\n"
      "tessel.model opset(ai.onnx=17) {\n"
      "graph @main(%x: f32[2] = dense<[1.5, -2]>) -> (%x: f32[2]) {  // trailing\n"
      "  return %x\n"
      "}\n"
      "}\n";
  auto m = parse_model(text);
  ASSERT_TRUE(m->graph->inputs[0]->constant);
  EXPECT_EQ(m->graph->inputs[0]->constant->data<float>()[1], -2.0f);
  round_trip(*m);
}

TEST(IrText, ElidedConstantsArePrintedButNotParseable) {
  Model m;
  GraphBuilder b(m);
  b.output(b.constant(filled(DType::F32, {100}, 1), "big"));
  PrintOptions o;
  o.elide_large_constants = true;
  std::string text = print_model(m, o);
  EXPECT_NE(text.find("dense<...>"), std::string::npos);
  EXPECT_THROW(parse_model(text), Error);
}

std::string parse_error(const std::string& text) {
  try {
    parse_model(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(IrText, ParseErrorsGiveLineAndColumn) {
  const std::string head = "tessel.model opset(ai.onnx=17) {\ngraph @main(%x: f32[2]) -> (%y: f32[2]) {\n";
  EXPECT_EQ(parse_error(head + "  %y = Relu(%z) : f32[2]\n  return %y\n}\n}\n"),
            "3:13: use of undefined value %z");
  EXPECT_EQ(parse_error(head + "  %x = Relu(%x) : f32[2]\n  return %x\n}\n}\n"), "3:3: value %x is already defined");
  EXPECT_EQ(parse_error(head + "  %y = Relu(%x) : f33[2]\n  return %y\n}\n}\n"), "3:19: unknown type 'f33'");
  EXPECT_EQ(parse_error(head + "  %y = Relu(%x : f32[2]\n  return %y\n}\n}\n"), "3:16: expected ')', got ':'");
  EXPECT_EQ(parse_error(head + "  %y = const f32[3] dense<[1, 2]>\n  return %y\n}\n}\n"),
            "3:27: expected 3 elements, got 2");
  EXPECT_EQ(parse_error(head + "  %y = const i8[1] dense<[300]>\n  return %y\n}\n}\n"),
            "3:27: value 300 is out of range for i8");
  EXPECT_EQ(parse_error(head + "  %y = Relu(%x) {a = []} : f32[2]\n  return %y\n}\n}\n"),
            "3:22: an empty list needs its kind: ints[], floats[], strings[], tensors[] or graphs[]");
  EXPECT_EQ(parse_error(head + "  %y = Relu(%x) {s = \"abc} : f32[2]\n  return %y\n}\n}\n").substr(0, 5), "3:22:");
  EXPECT_EQ(parse_error(head + "  %y = Relu(%x) : f32[2+]\n  return %y\n}\n}\n").substr(0, 5), "3:23:");
  EXPECT_EQ(parse_error(head + "  %y = Relu(%x) : f32[2]\n  return %x\n}\n}\n"),
            "2:29: output 0 of graph @main is declared as %y but returned as %x");
  EXPECT_EQ(parse_error(head + "  %y = Relu(%x) : f32[2]\n"), "4:1: unterminated graph @main");
  EXPECT_EQ(parse_error("tessel.modl {"), "1:1: expected 'tessel.model', got 'tessel.modl'");
  EXPECT_EQ(parse_error(head + "  %y = const f32[2] dense<hex:00>\n  return %y\n}\n}\n"),
            "3:31: hex data has 1 bytes, the type needs 8");
}

TEST(IrText, SiblingGraphValuesAreNotVisible) {
  const std::string text =
      "tessel.model opset(ai.onnx=17) {\n"
      "graph @main(%c: bool[], %x: f32[2]) -> (%y: f32[2]) {\n"
      "  %y = If(%c) {else_branch = graph @else() -> (%e: f32[2]) {\n"
      "      %e = Neg(%x) : f32[2]\n"
      "      return %e\n"
      "    }, then_branch = graph @then() -> (%t: f32[2]) {\n"
      "      %t = Add(%x, %e) : f32[2]\n"
      "      return %t\n"
      "    }} : f32[2]\n"
      "  return %y\n"
      "}\n"
      "}\n";
  EXPECT_EQ(parse_error(text), "7:20: use of undefined value %e");
}

TEST(IrText, ParseType) {
  EXPECT_EQ(parse_type("f32[batch,3]"), Type::tensor(DType::F32, {Dim::sym("batch"), 3}));
  EXPECT_EQ(parse_type("seq<i64[*]>"), Type::sequence(Type::tensor_unknown_shape(DType::I64)));
  EXPECT_EQ(parse_type("?"), Type{});
  EXPECT_EQ(parse_type("f16[]"), Type::tensor(DType::F16, {}));
  EXPECT_THROW(parse_type("f32[3"), Error);
}

// ---- the parsed model computes the same as the original ----------------------

void add_kernel(KernelContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  Tensor out(DType::F32, a.shape());
  for (int64_t i = 0; i < a.numel(); ++i) out.set_f64(i, a.get_f64(i) + b.get_f64(i % b.numel()));
  c.set_output(0, out);
}

void scale_kernel(KernelContext& c) {
  const Tensor& a = c.input(0);
  const float k = c.node.attr_float("k", 1.0f);
  Tensor out(DType::F32, a.shape());
  for (int64_t i = 0; i < a.numel(); ++i) out.set_f64(i, a.get_f64(i) * k);
  c.set_output(0, out);
}

TEST(IrText, ParsedModelRunsToTheSameResults) {
  OpRegistry reg;
  reg.add(OpSchema{.name = "TAdd", .min_inputs = 2, .max_inputs = 2, .kernel = add_kernel});
  reg.add(OpSchema{.name = "TScale", .min_inputs = 1, .max_inputs = 1, .kernel = scale_kernel});
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {Dim::sym("n"), 4});
  Tensor w(DType::F32, {4});
  for (int i = 0; i < 4; ++i) w.set_f64(i, 0.1 * i + 1.0 / 3.0);
  Value* y = b.op("TAdd", {x, b.constant(w, "w")});
  Value* z = b.op("TScale", {y}, {{"k", Attribute::of_float(0.7f)}});
  b.output(z);
  auto p = parse_model(print_model(m));
  Tensor in(DType::F32, {3, 4});
  for (int i = 0; i < 12; ++i) in.set_f64(i, std::sin(i * 1.7));
  Interpreter interp(reg);
  auto r1 = interp.run(*m.graph, {in});
  auto r2 = interp.run(*p->graph, {in});
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_TRUE(r1[0].tensor.bitwise_equal(r2[0].tensor));
}


// ---- every ONNX node-test model round-trips --------------------------------
// Gated on $TESSEL_NODE_TESTS_DIR (the onnx_test_runner layout generated by
// tools/gen_node_tests.py): each model is imported, printed, parsed and
// printed again (before and after shape inference), and the parsed model is
// run on test_data_set_0 with bit-identical results to the imported one.
bool same_values(const RtValue& a, const RtValue& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == RtValue::Kind::Tensor) return a.tensor.bitwise_equal(b.tensor);
  if (a.seq.size() != b.seq.size()) return false;
  for (size_t i = 0; i < a.seq.size(); ++i)
    if (!a.seq[i].bitwise_equal(b.seq[i])) return false;
  return true;
}

TEST(IrText, EveryNodeTestModelRoundTrips) {
  const char* dir = std::getenv("TESSEL_NODE_TESTS_DIR");
  if (!dir) GTEST_SKIP() << "set TESSEL_NODE_TESTS_DIR to the generated node tests";
  namespace fs = std::filesystem;
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(dir))
    if (fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  size_t imported = 0, round_trips = 0, inferred_round_trips = 0, ran = 0, same = 0;
  std::vector<std::string> bad, pipeline_bad;
  size_t opt_same = 0, opt_ran = 0;
  for (const fs::path& c : cases) {
    const std::string name = c.filename().string();
    std::unique_ptr<Model> m;
    try {
      m = import_onnx_file((c / "model.onnx").string());
    } catch (const Error&) {
      continue;
    }
    ++imported;
    std::unique_ptr<Model> p;
    try {
      const std::string a = print_model(*m);
      p = parse_model(a);
      if (print_model(*p) != a) throw Error("text differs after a round trip");
      ++round_trips;
      auto q = parse_model(a);
      infer_shapes(*q, {});
      const std::string b = print_model(*q);
      if (print_model(*parse_model(b)) != b) throw Error("text differs after inference and a round trip");
      ++inferred_round_trips;
    } catch (const Error& e) {
      bad.push_back(name + ": " + e.what());
      continue;
    }
    // The whole pipeline, verified after every pass, keeps results too.
    std::unique_ptr<Model> opt = parse_model(print_model(*m));
    try {
      run_pipeline(*opt, PassOptions{});
    } catch (const Error& e) {
      pipeline_bad.push_back(name + ": " + e.what());
      opt.reset();
    }
    // Same results as the imported model on the first data set.
    const fs::path data = c / "test_data_set_0";
    std::vector<RtValue> inputs;
    bool ok = fs::exists(data);
    for (size_t i = 0; ok && i < m->graph->inputs.size(); ++i) {
      RtValue v;
      ok = read_value_pb_file((data / str_cat("input_", i, ".pb")).string(), m->graph->inputs[i]->type, &v);
      inputs.push_back(v);
    }
    if (!ok) continue;
    Interpreter interp;
    std::vector<RtValue> r1;
    try {
      r1 = interp.run(*m->graph, inputs);
    } catch (const Error&) {
      continue;
    }
    ++ran;
    try {
      auto r2 = interp.run(*p->graph, inputs);
      bool eq = r1.size() == r2.size();
      for (size_t i = 0; eq && i < r1.size(); ++i) eq = same_values(r1[i], r2[i]);
      // Random ops legitimately differ between runs.
      if (eq || name.find("random") != std::string::npos || name.find("bernoulli") != std::string::npos) ++same;
      else bad.push_back(name + ": results differ");
    } catch (const Error& e) {
      bad.push_back(name + ": parsed model fails to run: " + e.what());
    }
    if (!opt) continue;
    ++opt_ran;
    try {
      auto r3 = interp.run(*opt->graph, inputs);
      bool eq = r1.size() == r3.size();
      for (size_t i = 0; eq && i < r1.size(); ++i) eq = same_values(r1[i], r3[i]);
      if (eq || name.find("random") != std::string::npos || name.find("bernoulli") != std::string::npos) ++opt_same;
      else pipeline_bad.push_back(name + ": optimised results differ");
    } catch (const Error& e) {
      pipeline_bad.push_back(name + ": optimised model fails to run: " + e.what());
    }
  }
  std::cout << cases.size() << " node-test models, " << imported << " imported; round trip " << round_trips << "/"
            << imported << ", after shape inference " << inferred_round_trips << "/" << imported
            << "; same results " << same << "/" << ran << "; after the verified pipeline, bit-identical results "
            << opt_same << "/" << opt_ran << " (" << pipeline_bad.size() << " failures)\n";
  for (const auto& b : bad) std::cout << "  " << b << "\n";
  for (const auto& b : pipeline_bad) std::cout << "  pipeline: " << b << "\n";
  EXPECT_TRUE(bad.empty());
  EXPECT_TRUE(pipeline_bad.empty());
}

}  // namespace
}  // namespace tessel
