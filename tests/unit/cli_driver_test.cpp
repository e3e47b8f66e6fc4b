// Tests of the CLI's driver pieces: option parsing, symbol binding, random
// inputs (index bounds), comparison and the JSON writer.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "tessel/driver/compare.h"
#include "tessel/driver/json_util.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/options.h"
#include "tessel/driver/random_inputs.h"
#include "tessel/driver/session.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

TEST(CliOptions, DimBindings) {
  auto d = parse_dim_bindings({"batch=2", "seq=128", "batch=2"});
  EXPECT_EQ(d.at("batch"), 2);
  EXPECT_EQ(d.at("seq"), 128);
  EXPECT_THROW(parse_dim_bindings({"batch=2", "batch=3"}), Error);
  EXPECT_THROW(parse_dim_binding("batch"), Error);
  EXPECT_THROW(parse_dim_binding("=3"), Error);
  EXPECT_THROW(parse_dim_binding("batch=0"), Error);
  EXPECT_THROW(parse_dim_binding("batch=-1"), Error);
  EXPECT_THROW(parse_dim_binding("batch=x"), Error);
  EXPECT_THROW(parse_dim_binding("batch=99999999999999999999999"), Error);
}

TEST(CliOptions, InputBindingsAndNames) {
  auto [n, f] = parse_input_binding("x=a=b.npy");
  EXPECT_EQ(n, "x");
  EXPECT_EQ(f, "a=b.npy");
  EXPECT_THROW(parse_input_binding("x"), Error);
  EXPECT_THROW(parse_input_binding("x="), Error);
  EXPECT_EQ(parse_target("reference"), Target::Reference);
  EXPECT_THROW(parse_target("gpu"), Error);
  EXPECT_THROW(parse_precision("fp8"), Error);
  DriverOptions o;
  o.target = Target::Cuda;
  EXPECT_THROW(check_options_supported(o), Error);
  o.target = Target::Cpu;
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    o.precision = p;
    EXPECT_NO_THROW(check_options_supported(o));
  }
}

TEST(CliLoader, DetectsFormats) {
  EXPECT_EQ(detect_model_format("m.onnx", "\x08\x07\x12"), ModelFormat::Onnx);
  EXPECT_EQ(detect_model_format("m.tir", "tessel.model"), ModelFormat::TextIR);
  EXPECT_EQ(detect_model_format("m.txt", "// comment\nmodel"), ModelFormat::TextIR);
  EXPECT_EQ(detect_model_format("m.onnx", "TESSELX\1"), ModelFormat::Artifact);
  EXPECT_THROW(load_model("/nonexistent/model.onnx"), Error);
  EXPECT_THROW(load_model("/"), Error);
}

// x: f32[batch, 3]; ids: i64[batch, seq] -> Cast -> Gather(table f32[7, 2]).
std::unique_ptr<Model> two_input_model() {
  auto m = std::make_unique<Model>();
  m->opsets[""] = 17;
  Graph& g = *m->graph;
  g.add_input("x", Type::tensor(DType::F32, {Dim::sym("batch"), 3}));
  Value* ids = g.add_input("ids", Type::tensor(DType::I64, {Dim::sym("batch"), Dim::sym("seq")}));
  Value* table = g.add_initializer("table", Tensor(DType::F32, {7, 2}));
  Node* cast = g.add_node("Cast", {ids}, 1, {{"to", Attribute::of_int(6)}});
  Node* gather = g.add_node("Gather", {table, cast->outputs[0]}, 1, {{"axis", Attribute::of_int(0)}});
  g.outputs.push_back(gather->outputs[0]);
  return m;
}

TEST(CliSession, BindsSymbolsFromInputsThenDims) {
  auto m = two_input_model();
  std::map<std::string, RtValue> given;
  given["x"] = RtValue(Tensor(DType::F32, {4, 3}));
  std::ostringstream notes;
  auto dims = bind_symbols(*m->graph, given, {{"seq", 9}}, &notes);
  EXPECT_EQ(dims.at("batch"), 4);
  EXPECT_EQ(dims.at("seq"), 9);
  EXPECT_EQ(notes.str(), "");
  // A --dim that disagrees with an input is an error naming both.
  try {
    bind_symbols(*m->graph, given, {{"batch", 5}}, &notes);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conflicts with input 'x'"), std::string::npos) << e.what();
  }
  // Unbound symbols of random inputs default to 1, with a note.
  dims = bind_symbols(*m->graph, {}, {}, &notes);
  EXPECT_EQ(dims.at("batch"), 1);
  EXPECT_EQ(dims.at("seq"), 1);
  EXPECT_NE(notes.str().find("using batch=1"), std::string::npos);
  // A wrong input shape is an error.
  given["x"] = RtValue(Tensor(DType::F32, {4, 5}));
  EXPECT_THROW(bind_symbols(*m->graph, given, {}, &notes), Error);
}

TEST(CliRandom, IndicesFollowGatherThroughCast) {
  auto m = two_input_model();
  const Graph& g = *m->graph;
  EXPECT_EQ(index_bound(g, g.inputs[1], {}), 7);
  EXPECT_EQ(index_bound(g, g.inputs[0], {}), std::nullopt);
  const Tensor t = random_input(g, 1, {{"batch", 3}, {"seq", 1000}}, 5);
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{3, 1000}));
  int64_t lo = 100, hi = -1;
  for (int64_t i = 0; i < t.numel(); ++i) lo = std::min(lo, t.get_i64(i)), hi = std::max(hi, t.get_i64(i));
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 6);
  EXPECT_THROW(random_input(g, 1, {{"batch", 3}}, 5), Error);  // seq unbound
}

TEST(CliRandom, DistributionsAndDeterminism) {
  const Tensor a = random_tensor(DType::F32, {1000}, 1);
  const Tensor b = random_tensor(DType::F32, {1000}, 1);
  const Tensor c = random_tensor(DType::F32, {1000}, 2);
  EXPECT_TRUE(a.bitwise_equal(b));
  EXPECT_FALSE(a.bitwise_equal(c));
  double lo = 1, hi = -1;
  for (int64_t i = 0; i < a.numel(); ++i) lo = std::min(lo, a.get_f64(i)), hi = std::max(hi, a.get_f64(i));
  EXPECT_GE(lo, -1.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_LT(lo, -0.9);
  EXPECT_GT(hi, 0.9);
  const Tensor ints = random_tensor(DType::I32, {1000}, 3);
  for (int64_t i = 0; i < ints.numel(); ++i) ASSERT_TRUE(ints.get_i64(i) >= 0 && ints.get_i64(i) < 8);
  const Tensor i2 = random_tensor(DType::I2, {100}, 3);
  for (int64_t i = 0; i < i2.numel(); ++i) ASSERT_TRUE(i2.get_i64(i) >= 0 && i2.get_i64(i) < 2);
  const Tensor bools = random_tensor(DType::Bool, {100}, 3);
  for (int64_t i = 0; i < bools.numel(); ++i) ASSERT_LE(bools.raw()[i], 1);
  const Tensor s = random_tensor(DType::String, {10}, 3);
  for (const auto& str : s.strings()) EXPECT_TRUE(!str.empty() && str.size() <= 8);
  const Tensor bf = random_tensor(DType::BF16, {10}, 3);
  for (int64_t i = 0; i < bf.numel(); ++i) EXPECT_LE(std::abs(bf.get_f64(i)), 1.0);
}

TEST(CliCompare, Tolerances) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto f32 = [](std::vector<float> v) { return Tensor::from_f32({static_cast<int64_t>(v.size())}, v); };
  EXPECT_EQ(compare_tensors(f32({1.0f, 100.0f}), f32({1.0005f, 100.09f})), "");
  EXPECT_NE(compare_tensors(f32({1.0f}), f32({1.002f})), "");
  EXPECT_EQ(compare_tensors(f32({0.0f}), f32({1e-8f})), "");  // atol
  EXPECT_EQ(compare_tensors(f32({static_cast<float>(nan)}), f32({static_cast<float>(nan)})), "");
  EXPECT_NE(compare_tensors(f32({1.0f}), f32({static_cast<float>(nan)})), "");
  EXPECT_NE(compare_tensors(f32({static_cast<float>(nan)}), f32({1.0f})), "");
  EXPECT_EQ(compare_tensors(f32({static_cast<float>(inf)}), f32({static_cast<float>(inf)})), "");
  EXPECT_NE(compare_tensors(f32({static_cast<float>(-inf)}), f32({static_cast<float>(inf)})), "");
  EXPECT_NE(compare_tensors(f32({3e38f}), f32({static_cast<float>(inf)})), "");
  EXPECT_NE(compare_tensors(f32({1, 2}), Tensor::from_f32({2, 1}, {1, 2})), "");   // shape
  EXPECT_NE(compare_tensors(f32({1}), Tensor::from_i64({1})), "");                // dtype
  EXPECT_NE(compare_tensors(Tensor::from_i64({5}), Tensor::from_i64({6})), "");   // exact
  Tensor s1(DType::String, {1}), s2(DType::String, {1});
  s1.mutable_strings()[0] = "a";
  s2.mutable_strings()[0] = "b";
  EXPECT_NE(compare_tensors(s1, s2), "");
  const std::string msg = compare_tensors(f32({1, 2, 3}), f32({1, 5, 3}));
  EXPECT_NE(msg.find("1 of 3 elements differ; first at [1]"), std::string::npos) << msg;
}

// The --json lines keep what the hand-written writer gave them: keys in the
// order they are set (a replaced key keeps its place), NaN as null, and invalid
// UTF-8 replaced (U+FFFD) rather than thrown on.
TEST(CliJson, Line) {
  Json j = Json::object();
  j["a"] = 1;
  j["s"] = "q\"\\\n\x01";
  j["nan"] = std::numeric_limits<double>::quiet_NaN();
  j["d"] = 0.5;
  Json arr = Json::array();
  arr.push_back(true);
  arr.push_back(Json());
  arr.push_back(int64_t{-3});
  arr.push_back(size_t{7});
  j["arr"] = std::move(arr);
  j["bad"] = std::string("\xff", 1);
  EXPECT_EQ(json_line(j), R"({"a":1,"s":"q\"\\\n\u0001","nan":null,"d":0.5,"arr":[true,null,-3,7],"bad":")"
                          "\xEF\xBF\xBD"
                          R"("})");
  j["a"] = 2;
  EXPECT_EQ(json_line(j).substr(0, 7), R"({"a":2,)");
}

TEST(CliSession, DescribeAndPreview) {
  Tensor t = Tensor::from_f32({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(describe_value(RtValue(t)), "f32[2,5]");
  EXPECT_EQ(preview_values(t, 6), "[0, 1, 2, 3, ..., 8, 9]");
  EXPECT_EQ(preview_values(Tensor::from_i64({1, 2}), 6), "[1, 2]");
}

}  // namespace
}  // namespace tessel
