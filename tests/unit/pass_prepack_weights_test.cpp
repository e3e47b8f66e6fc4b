// prepack_weights: constant f32 GEMM weights stored as the CPU GEMM's 16-wide
// panels behind tessel::UnpackPanels (values checked element by element and
// through the interpreter), the cases it leaves alone, and the GEMM reading
// the panels in place (gemm.pack b=0): every register tile of the search
// space against the interpreter, in the loop-IR evaluator and compiled, and
// the tiles that cannot read them refused with a clear error.
#include <gtest/gtest.h>

#include <tuple>

#include "lower_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/schedule/gemm.h"

namespace tessel {
namespace {

using testing::count_ops;

// [rows, cols] with element (r, c) = r * 1000 + c, so that a misplaced
// element shows.
Tensor numbered(int64_t rows, int64_t cols) {
  Tensor t(DType::F32, {rows, cols});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t.set_f64(r * cols + c, static_cast<double>(r * 1000 + c));
  return t;
}

const Node* producer_of_b(const Graph& g, const std::string& output) {
  for (const auto& n : g.nodes())
    if (n->outputs[0]->name == output) return n->input(1)->producer;
  return nullptr;
}

TEST(PassPrepackWeights, ConstantWeightsBecomePanels) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {3, 20});
  Value* w = b.constant(numbered(20, 37), "w");   // [K, N]
  Value* wt = b.constant(numbered(37, 20), "wt"); // [N, K]
  Value* mm = b.op("MatMul", {x, w});
  Value* gm = b.op("Gemm", {x, wt}, {{"transB", Attribute::of_int(1)}, {"alpha", Attribute::of_float(0.5f)}});
  // A tied head: the same [N, K] weight read through a Transpose, and
  // gathered by another node (it must stay for that one).
  Value* head = b.op("MatMul", {x, b.op("Transpose", {wt}, {{"perm", Attribute::of_ints({1, 0})}})});
  Value* rows = b.op("Gather", {wt, b.const_i64({4, 0})});
  b.outputs({mm, gm, head, rows});
  // Types and shapes only: folding would fold the Transpose of the constant.
  infer_shapes(m, PassOptions{});
  auto ref = testing::clone(m);
  ASSERT_TRUE(prepack_gemm_weights(m));
  EXPECT_NO_THROW(verify_model(m));
  EXPECT_EQ(count_ops(*m.graph, "UnpackPanels"), 3u);
  EXPECT_EQ(count_ops(*m.graph, "Transpose"), 0u);
  for (size_t o = 0; o < 3; ++o) {
    SCOPED_TRACE("output " + std::to_string(o));
    const bool kn = o == 0;  // the MatMul's weight is [K, N]; the others read [N, K]
    const Node* u = producer_of_b(*m.graph, m.graph->outputs[o]->name);
    ASSERT_TRUE(u);
    EXPECT_EQ(u->op, "UnpackPanels");
    const Tensor& p = *u->input(0)->constant;
    // 37 columns padded to 64: four panels of [K = 20, 16].
    ASSERT_EQ(p.shape(), (std::vector<int64_t>{4, 20, 16}));
    for (int64_t j = 0; j < 64; ++j)
      for (int64_t k = 0; k < 20; ++k) {
        const double want = j < 37 ? static_cast<double>(kn ? k * 1000 + j : j * 1000 + k) : 0.0;
        ASSERT_EQ(p.get_f64(((j / 16) * 20 + k) * 16 + j % 16), want) << "column " << j << " row " << k;
      }
  }
  for (const auto& n : m.graph->nodes())
    if (n->op == "Gemm") {
      EXPECT_EQ(n->attr_int("transB", 1), 0);
    }
  // The Gemm and the tied head read one [N, K] weight the same way: one copy.
  EXPECT_EQ(producer_of_b(*m.graph, m.graph->outputs[1]->name)->input(0),
            producer_of_b(*m.graph, m.graph->outputs[2]->name)->input(0));
  testing::expect_same_results(*ref, m, {}, 0);
  EXPECT_FALSE(prepack_gemm_weights(m));  // B is an UnpackPanels now
}

// A conv over few positions against its output channels (the GEMM takes
// the positions as rows: schedule/gemm.h conv_rows_are_positions) reads its
// weight W [OC, C, KH, KW] as B[k, oc] with k over (kh, kw, c): panels of
// that, unpacked back to W by row_dims and row_order. One over many
// positions keeps its weight.
TEST(PassPrepackWeights, ConvWeightsForPositionRowsBecomePanels) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {1, 30, 6, 6});
  Tensor w(DType::F32, {130, 30, 3, 3});  // K = 270, 36 positions
  for (int64_t i = 0; i < w.numel(); ++i) w.set_f64(i, static_cast<double>(i));
  const Attrs pads{{"pads", Attribute::of_ints({1, 1, 1, 1})}};
  Value* few = b.op("Conv", {x, b.constant(w, "w")}, pads);
  Value* y = b.input("y", DType::F32, {1, 8, 40, 40});
  Tensor v(DType::F32, {16, 8, 3, 3});  // 1600 positions
  for (int64_t i = 0; i < v.numel(); ++i) v.set_f64(i, static_cast<double>(i % 17) - 8.0);
  Value* many = b.op("Conv", {y, b.constant(v, "v")}, pads);
  b.outputs({few, many});
  infer_shapes(m, PassOptions{});
  auto ref = testing::clone(m);
  ASSERT_TRUE(prepack_gemm_weights(m));
  EXPECT_NO_THROW(verify_model(m));
  EXPECT_EQ(count_ops(*m.graph, "UnpackPanels"), 1u);
  const Node* u = producer_of_b(*m.graph, m.graph->outputs[0]->name);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->op, "UnpackPanels");
  EXPECT_EQ(u->attr_ints("row_dims"), (std::vector<int64_t>{30, 3, 3}));
  EXPECT_EQ(u->attr_ints("row_order"), (std::vector<int64_t>{1, 2, 0}));
  const Tensor& p = *u->input(0)->constant;
  ASSERT_EQ(p.shape(), (std::vector<int64_t>{12, 270, 16}));  // 130 channels padded to 192
  for (int64_t oc = 0; oc < 192; oc += 7)
    for (int64_t c = 0; c < 30; ++c)
      for (int64_t t = 0; t < 9; ++t) {
        const double want = oc < 130 ? static_cast<double>((oc * 30 + c) * 9 + t) : 0.0;
        ASSERT_EQ(p.get_f64(((oc / 16) * 270 + t * 30 + c) * 16 + oc % 16), want) << oc << " " << c << " " << t;
      }
  testing::expect_same_results(*ref, m, {}, 1e-5);
}

// Malformed row_dims / row_order are one clear error, not a misread.
TEST(PassPrepackWeights, UnpackPanelsRowAttributesAreChecked) {
  const auto infer = [](std::vector<int64_t> dims, std::vector<int64_t> order) {
    Model m;
    GraphBuilder b(m);
    Value* p = b.constant(Tensor(DType::F32, {1, 6, 16}), "p");
    Attrs attrs{{"columns", Attribute::of_int(10)}, {"row_dims", Attribute::of_ints(dims)}};
    if (!order.empty()) attrs["row_order"] = Attribute::of_ints(order);
    b.output(b.op("UnpackPanels", {p}, attrs, "tessel"));
    infer_shapes(m, PassOptions{});
    return m.graph->outputs[0]->type;
  };
  EXPECT_EQ(infer({2, 3}, {1, 0}).shape, (Shape{Dim(10), Dim(2), Dim(3)}));
  for (const auto& [dims, order, what] :
       std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::string>>{
           {{2, 2}, {}, "row_dims hold 4 rows"}, {{2, 3}, {0, 0}, "permutation"}, {{2, 3}, {0}, "permutation"},
           {{0, 6}, {}, "positive"}}) {
    try {
      infer(dims, order);
      ADD_FAILURE() << "accepted " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

TEST(PassPrepackWeights, LeavesOtherProductsAlone) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {3, 20});
  Value* y = b.input("y", DType::F32, {20, 40});
  Value* xs = b.input("xs", DType::F32, {3, 8});
  Value* xb = b.input("xb", DType::F32, {2, 2, 3, 20});
  Value* a = b.op("MatMul", {x, y});                                // B not constant
  Value* c = b.op("MatMul", {xs, b.constant(numbered(8, 40))});     // K < 16
  Value* d = b.op("MatMul", {x, b.constant(numbered(20, 9))});      // N < 16
  Tensor batched(DType::F32, {2, 20, 40});
  Value* e = b.op("MatMul", {xb, b.constant(batched)});             // a batch of B broadcast over two A dims
  b.outputs({a, c, d, e});
  infer_shapes(m, PassOptions{});
  EXPECT_FALSE(prepack_gemm_weights(m));
}

// A batched MatMul by a constant batch of matrices [3, K = 20, N = 37] (a
// Winograd convolution's transformed weights): each matrix's panels after
// the previous one's, unpacked by the batch attribute; the same results,
// and the GEMM reads the panels in place.
TEST(PassPrepackWeights, BatchedConstantWeightsBecomePanels) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {3, 5, 20});
  Tensor w(DType::F32, {3, 20, 37});
  for (int64_t i = 0; i < w.numel(); ++i) w.set_f64(i, static_cast<double>(i % 997) / 97.0);
  b.output(b.op("MatMul", {x, b.constant(w, "w")}));
  infer_shapes(m, PassOptions{});
  auto ref = testing::clone(m);
  ASSERT_TRUE(prepack_gemm_weights(m));
  EXPECT_NO_THROW(verify_model(m));
  const Node* u = producer_of_b(*m.graph, m.graph->outputs[0]->name);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->op, "UnpackPanels");
  EXPECT_EQ(u->attr_int("batch", 1), 3);
  const Tensor& p = *u->input(0)->constant;
  ASSERT_EQ(p.shape(), (std::vector<int64_t>{12, 20, 16}));  // 4 panels (37 -> 64 columns) per matrix
  for (int64_t e = 0; e < 3; ++e)
    for (int64_t j = 0; j < 64; ++j)
      for (int64_t k = 0; k < 20; ++k) {
        const double want = j < 37 ? w.get_f64((e * 20 + k) * 37 + j) : 0.0;
        ASSERT_EQ(p.get_f64(((e * 4 + j / 16) * 20 + k) * 16 + j % 16), want) << e << " " << j << " " << k;
      }
  testing::expect_same_results(*ref, m, {}, 0);
  EXPECT_FALSE(prepack_gemm_weights(m));
  const CompiledModel c = lower_for_cpu(m);
  ASSERT_EQ(c.lowered.size(), 1u);
  EXPECT_EQ(c.lowered[0].schedule, "gemm");
  EXPECT_EQ(c.lowered[0].gemm_shape.b_panel_width, 16);
  const std::vector<RtValue> in = testing::random_inputs(*m.graph, {}, 5);
  const std::vector<RtValue> want = Interpreter().run(*m.graph, in);
  const testing::EvalRun got = testing::run_lowered(m, in);
  EXPECT_EQ(compare_tensors(got.outputs[0].tensor, want[0].tensor, Tolerance{1e-5, 1e-5}), "");
  // The batch must divide the panels, and goes without row_dims.
  for (const auto& [attrs, what] : std::vector<std::pair<Attrs, std::string>>{
           {{{"columns", Attribute::of_int(10)}, {"batch", Attribute::of_int(4)}}, "divide"},
           {{{"columns", Attribute::of_int(10)}, {"batch", Attribute::of_int(2)}, {"row_dims", Attribute::of_ints({6})}},
            "row_dims"}}) {
    Model bad;
    GraphBuilder bb(bad);
    bb.output(bb.op("UnpackPanels", {bb.constant(Tensor(DType::F32, {2, 6, 16}), "p")}, attrs, "tessel"));
    try {
      infer_shapes(bad, PassOptions{});
      ADD_FAILURE() << "accepted " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

// The CPU pipeline with a product whose weight is prepacked; N = 100 pads
// to 128 columns.
std::unique_ptr<Model> prepacked_model(int64_t n) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {2, 9, 40});
  std::mt19937 rng(3);
  Value* w = b.constant(testing::random_tensor(DType::F32, {40, n}, &rng), "w");
  Value* bias = b.constant(testing::random_tensor(DType::F32, {n}, &rng), "bias");
  b.output(b.op("Relu", {b.op("Add", {b.op("MatMul", {x, w}), bias})}));
  PassOptions o;
  o.cpu = true;
  run_pipeline(*m, o);
  return m;
}

bool has_buffer(const loop::Kernel& k, const std::string& fragment) {
  bool found = false;
  loop::visit_stmt(k.body, [&](const loop::Stmt& s) {
    if (s->kind == loop::StmtKind::Allocate && s->buffer->name.find(fragment) != std::string::npos) found = true;
  }, [](const loop::Expr&) {});
  return found;
}

TEST(PrepackedGemm, DefaultScheduleReadsThePanelsInPlace) {
  auto m = prepacked_model(100);
  EXPECT_EQ(count_ops(*m->graph, "UnpackPanels"), 1u);
  const CompiledModel c = lower_for_cpu(*m);
  ASSERT_EQ(c.lowered.size(), 1u);
  const LoweredGroup& lg = c.lowered[0];
  EXPECT_EQ(lg.schedule, "gemm");
  ASSERT_TRUE(lg.sched.find("gemm.pack"));
  EXPECT_EQ(lg.sched.find("gemm.pack")->int_attr("b", 1), 0);
  EXPECT_FALSE(has_buffer(lg.kernel, "bpack"));
  EXPECT_EQ(lg.gemm_shape.b_panel_width, 16);
  EXPECT_EQ(lg.gemm_shape.b_panel_columns, 128);
  const std::vector<RtValue> in = testing::random_inputs(*m->graph, {}, 5);
  const std::vector<RtValue> want = Interpreter().run(*m->graph, in);
  const testing::EvalRun got = testing::run_lowered(*m, in);
  EXPECT_EQ(compare_tensors(got.outputs[0].tensor, want[0].tensor, Tolerance{1e-5, 1e-5}), "");
}

// Every tile shape the tuner may pick, with the panels read in place where
// the tile reads whole panels and packed otherwise; each through the
// evaluator (and, with LLVM, compiled) against the interpreter.
TEST(PrepackedGemm, EveryTileAgreesWithTheInterpreter) {
  struct Tile {
    int mr, nr, lanes, b;
  };
  const Tile tiles[] = {{6, 16, 8, 0}, {4, 32, 8, 0}, {8, 32, 16, 0}, {4, 64, 16, 0},
                        {6, 48, 16, 1}, {6, 24, 8, 1}, {2, 8, 8, 1},   {8, 32, 16, 1}};
  auto m = prepacked_model(100);
  const std::vector<RtValue> in = testing::random_inputs(*m->graph, {}, 9);
  const std::vector<RtValue> want = Interpreter().run(*m->graph, in);
  const CompiledModel c = lower_for_cpu(*m);
  const FusionGroup* g = nullptr;
  for (const FusionGroup& fg : c.plan.groups)
    if (fg.compiled) g = &fg;
  ASSERT_TRUE(g);
  for (const Tile& t : tiles) {
    SCOPED_TRACE(str_cat("mr ", t.mr, " nr ", t.nr, " lanes ", t.lanes, " b ", t.b));
    Schedule s = c.lowered[0].sched;
    Primitive& tile = s.get("gemm.tile");
    tile.set("mr", t.mr);
    tile.set("nr", t.nr);
    tile.set("lanes", t.lanes);
    Primitive& block = s.get("gemm.block");
    block.set("mc", t.mr * 3);
    block.set("kc", 16);  // several K blocks: the panels' k offset moves
    block.set("nc", t.nr * 2);
    s.get("gemm.pack").set("b", t.b);
    const LoweredGroup lg = lower_cpu_group(*g, OpRegistry::global(), s);
    EXPECT_EQ(has_buffer(lg.kernel, "bpack"), t.b == 1);
    std::map<const Value*, RtValue> vals{{m->graph->inputs[0], in[0]}};
    testing::eval_group(lg, {}, vals);
    EXPECT_EQ(compare_tensors(vals.at(m->graph->outputs[0]).tensor, want[0].tensor, Tolerance{1e-5, 1e-5}), "");
  }
}

TEST(PrepackedGemm, TilesThatCannotReadThePanelsAreRefused) {
  auto m = prepacked_model(100);
  const CompiledModel c = lower_for_cpu(*m);
  const FusionGroup* g = nullptr;
  for (const FusionGroup& fg : c.plan.groups)
    if (fg.compiled) g = &fg;
  ASSERT_TRUE(g);
  // 48 wide: the last tile reads columns up to 144 of the 128 stored; 24
  // wide: not whole panels.
  for (int nr : {48, 24}) {
    Schedule s = c.lowered[0].sched;
    Primitive& tile = s.get("gemm.tile");
    tile.set("nr", nr);
    tile.set("lanes", 8);
    s.get("gemm.block").set("nc", nr * 2);
    s.get("gemm.pack").set("b", 0);
    try {
      lower_cpu_group(*g, OpRegistry::global(), s);
      ADD_FAILURE() << "nr " << nr << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("gemm.pack b=0"), std::string::npos) << e.what();
    }
  }
  // A weight that was not prepacked (the pipeline without the CPU target).
  Model plain;
  GraphBuilder b(plain);
  Value* x = b.input("x", DType::F32, {4, 32});
  std::mt19937 rng(1);
  b.output(b.op("MatMul", {x, b.constant(testing::random_tensor(DType::F32, {32, 32}, &rng))}));
  run_pipeline(plain, PassOptions{});
  const CompiledModel pc = lower_for_cpu(plain);
  Schedule s = pc.lowered.at(0).sched;
  EXPECT_EQ(s.find("gemm.pack")->int_attr("b", 0), 1);
  s.get("gemm.pack").set("b", 0);
  for (const FusionGroup& fg : pc.plan.groups)
    if (fg.compiled) {
      EXPECT_THROW(lower_cpu_group(fg, OpRegistry::global(), s), Error);
    }
}

#ifdef TESSEL_HAVE_CODEGEN_CPU
TEST(PrepackedGemm, CompiledMatchesTheInterpreter) {
  for (int64_t n : {16, 100, 300}) {
    SCOPED_TRACE("N " + std::to_string(n));
    auto m = prepacked_model(n);
    const std::vector<RtValue> in = testing::random_inputs(*m->graph, {}, 4);
    const std::vector<RtValue> want = Interpreter().run(*m->graph, in);
    DriverOptions o;
    o.threads = 2;
    const std::unique_ptr<CompiledModel> c = compile_for_cpu(*m, o);
    EXPECT_TRUE(c->exe->interpreter_ops().empty());
    const std::vector<RtValue> got = c->exe->run(in);
    EXPECT_EQ(compare_tensors(got[0].tensor, want[0].tensor, Tolerance{1e-5, 1e-5}), "");
  }
}
#endif

}  // namespace
}  // namespace tessel
