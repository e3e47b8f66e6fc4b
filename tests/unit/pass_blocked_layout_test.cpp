// blocked_layout (CPU target, --knob conv.blocked.on=1) and its ops,
// tessel::ToBlocked / FromBlocked: the ops' reference against values placed
// by hand (a channel count 16 does not divide), the values the pass stores
// blocked and those it leaves, the fusion plan (no kernel that only
// converts), the rewritten model against the original through the
// interpreter (exact), the lowered kernels against the interpreter (edge
// sizes, strides, pads, residual Adds), and the blocked conv's stores.
#include <gtest/gtest.h>

#include <random>

#include "lower_test_util.h"
#include "pass_test_util.h"
#include "tessel/interp/interpreter.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/passes/fusion.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

Attribute ints(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

Tensor random_tensor(const std::vector<int64_t>& shape, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return Tensor::from_f32(shape, v);
}

Tensor run_one(const Model& m, const Tensor& x) {
  return Interpreter().run(*m.graph, {RtValue(x)}).at(0).tensor;
}

std::unique_ptr<Model> op_model(const std::vector<int64_t>& x, const std::string& op, Attrs attrs) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Shape s;
  for (int64_t d : x) s.push_back(Dim(d));
  b.output(b.op(op, {b.input("x", DType::F32, s)}, attrs, "tessel"));
  PassOptions o;
  run_pipeline(*m, o);
  return m;
}

// ToBlocked: [1, 17, 2, 3] -> [1, 2, 2, 3, 16], element (c, h, w) at
// [c / 16, h, w, c % 16], zeros for channels 17..31; FromBlocked gives x back.
TEST(BlockedLayoutOps, ReferencePlacesChannelsInBlocks) {
  const Tensor x = random_tensor({1, 17, 2, 3}, 1, 1.0f);
  auto to = op_model({1, 17, 2, 3}, "ToBlocked", {{"block", Attribute::of_int(16)}});
  const Tensor y = run_one(*to, x);
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{1, 2, 2, 3, 16}));
  for (int64_t c = 0; c < 32; ++c)
    for (int64_t p = 0; p < 6; ++p) {
      const double want = c < 17 ? x.get_f64(c * 6 + p) : 0.0;
      EXPECT_EQ(y.get_f64(((c / 16) * 6 + p) * 16 + c % 16), want) << c << " " << p;
    }
  auto from = op_model({1, 2, 2, 3, 16}, "FromBlocked", {{"channels", Attribute::of_int(17)}});
  const Tensor back = run_one(*from, y);
  ASSERT_EQ(back.shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(back.get_f64(i), x.get_f64(i));
}

TEST(BlockedLayoutOps, RejectsBadAttributes) {
  EXPECT_THROW(op_model({1, 17, 2, 3}, "ToBlocked", {{"block", Attribute::of_int(0)}}), Error);
  EXPECT_THROW(op_model({1, 17, 2}, "FromBlocked", {{"channels", Attribute::of_int(17)}}), Error);
  // 2 blocks of 16 hold 17 to 32 channels, not 33 or 16.
  EXPECT_THROW(op_model({1, 2, 2, 3, 16}, "FromBlocked", {{"channels", Attribute::of_int(33)}}), Error);
  EXPECT_THROW(op_model({1, 2, 2, 3, 16}, "FromBlocked", {{"channels", Attribute::of_int(16)}}), Error);
  EXPECT_THROW(op_model({1, 2, 2, 3, 16}, "FromBlocked", {}), Error);
}

struct Net {
  int64_t c = 32, h = 12;   // channels after the stem, input size
  int64_t stride = 2;       // of the last block's convolutions
  bool output_mid = false;  // the first block's result is a graph output too
};

// A ResNet-like network: a stem conv (3 -> c) + Relu + MaxPool, a block
// (1x1, padded 3x3, 1x1, Add of the pool's output, Relu), a downsampling
// block (a strided 1x1 and a strided padded 3x3 added, Relu), and a global
// average pool.
std::unique_ptr<Model> net(const Net& n) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  unsigned seed = 10;
  const auto conv = [&](Value* x, int64_t in, int64_t out, int64_t k, int64_t stride) {
    const int64_t p = k / 2;
    return b.op("Conv",
                {x, b.constant(random_tensor({out, in, k, k}, seed++, 1.0f / std::sqrt(float(in * k * k)))),
                 b.constant(random_tensor({out}, seed++, 0.1f))},
                {{"pads", ints({p, p, p, p})}, {"strides", ints({stride, stride})}});
  };
  const int64_t c = n.c;
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(3), Dim(n.h), Dim(n.h)});
  Value* p0 = b.op("MaxPool", {b.op("Relu", {conv(x, 3, c, 3, 1)})},
                   {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}});
  Value* r1 = b.op("Relu", {conv(p0, c, c, 1, 1)});
  Value* r2 = b.op("Relu", {conv(r1, c, c, 3, 1)});
  Value* r3 = b.op("Relu", {b.op("Add", {conv(r2, c, c, 1, 1), p0})});
  Value* down = conv(r3, c, 2 * c, 1, n.stride);
  Value* r5 = b.op("Relu", {b.op("Add", {down, conv(r3, c, 2 * c, 3, n.stride)})});
  b.output(b.op("GlobalAveragePool", {r5}));
  if (n.output_mid) b.output(r3);
  PassOptions o;
  o.cpu = true;  // pad_conv_inputs and subsample_conv_inputs: the Pads and Slices the pass sees
  run_pipeline(*m, o);
  return m;
}

// Which values are blocked: the stored ones between kernels (the stem's
// Relu before the pool, the pool's output, the Pads' and Slices' outputs,
// block results read twice, the downsampling conv added to a later one, the
// global pool's input), never one fused into a single elementwise consumer.
TEST(PassBlockedLayout, BlocksTheStoredActivations) {
  TS_REQUIRE_OPS("Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Pad", "Slice");
  auto m = net({});
  ASSERT_TRUE(block_conv_layouts(*m));
  EXPECT_NO_THROW(verify_model(*m));
  EXPECT_FALSE(block_conv_layouts(*m)) << "a second run finds nothing";
  for (const auto& n : m->graph->nodes()) {
    if (n->op == "FromBlocked") {
      // Its producer is a ToBlocked; a Conv's output goes first through
      // its epilogue (never straight into a ToBlocked's pair).
      ASSERT_TRUE(n->input(0)->producer);
      EXPECT_EQ(n->input(0)->producer->op, "ToBlocked");
    }
    if (n->op == "ToBlocked") {
      const Node* p = n->input(0)->producer;
      ASSERT_TRUE(p);
      EXPECT_NE(p->op, "FromBlocked") << "a pair that converts and converts back";
    }
  }
  // Stem Relu, pool, the block's Relus r1 and r2, the padded copy for the
  // 3x3, the block result r3 (read by a Slice and a Pad), the Slice and the
  // Pad for the strided convs, the downsampling conv's output, and the last
  // Relu (read by the global pool): 10.
  EXPECT_EQ(count_ops(*m->graph, "ToBlocked"), 10u);
  // Every group that holds a conversion holds something else: no kernel
  // only converts.
  const FusionPlan p = plan_fusion(*m->graph, OpRegistry::global());
  for (const FusionGroup& g : p.groups) {
    bool other = false, conversion = false;
    for (const Node* n : g.nodes) {
      const bool conv = n->op == "ToBlocked" || n->op == "FromBlocked";
      conversion = conversion || conv;
      other = other || !conv;
    }
    EXPECT_TRUE(!conversion || other) << g.name;
    EXPECT_TRUE(g.root->op != "FromBlocked") << g.name;
  }
}

// Left plain: graph outputs, channel counts 16 does not divide, and values
// that a depthwise conv reads.
TEST(PassBlockedLayout, LeavesOtherValues) {
  TS_REQUIRE_OPS("Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool");
  auto odd = net({.c = 24});
  ASSERT_TRUE(block_conv_layouts(*odd));  // the downsampled 48 channels still are
  for (const auto& n : odd->graph->nodes()) {
    if (n->op == "ToBlocked") EXPECT_EQ(n->input(0)->type.shape->at(1).value(), 48);
  }
  auto out = net({.output_mid = true});
  ASSERT_TRUE(block_conv_layouts(*out));
  for (const auto& n : out->graph->nodes()) {
    if (n->op == "ToBlocked") EXPECT_NE(n->input(0)->name, out->graph->outputs[1]->name);
  }

  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(32), Dim(8), Dim(8)});
  Value* r = b.op("Relu", {b.op("Conv", {x, b.constant(random_tensor({32, 32, 1, 1}, 3, 0.2f))})});
  b.output(b.op("Conv", {r, b.constant(random_tensor({32, 1, 3, 3}, 4, 0.2f))},
                {{"group", Attribute::of_int(32)}, {"pads", ints({1, 1, 1, 1})}}));
  PassOptions o;
  run_pipeline(*m, o);
  EXPECT_FALSE(block_conv_layouts(*m));
}

// The same results as the plain model, exactly through the interpreter, and
// from the lowered kernels within f32 rounding: 16, 32 and 48 channels
// (24: only the downsampled values), strides 1 and 2, odd image sizes.
TEST(PassBlockedLayout, MatchesThePlainModel) {
  TS_REQUIRE_OPS("Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Pad", "Slice");
  const std::vector<Net> nets{{16, 12, 2, false}, {32, 13, 2, true}, {48, 9, 1, false}, {24, 11, 2, false}};
  for (size_t i = 0; i < nets.size(); ++i) {
    SCOPED_TRACE(i);
    auto m = net(nets[i]);
    auto ref = clone(*m);
    ASSERT_TRUE(block_conv_layouts(*m));
    testing::expect_same_results(*ref, *m, {}, 0.0);
    const testing::EvalRun r = testing::expect_lowered_matches(*m, {}, Tolerance{1e-5, 1e-5});
    EXPECT_EQ(r.interpreted, 0u);
  }
}

// A conv between blocked values stores each row of its output tile as
// whole 16-channel blocks: the store's index has no division left once
// the kernel is simplified (the lanes are the innermost axis).
TEST(PassBlockedLayout, BlockedConvStoresWholeBlocks) {
  TS_REQUIRE_OPS("Conv", "Relu");
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(64), Dim(14), Dim(14)});
  const auto conv = [&](Value* v, unsigned seed) {
    return b.op("Relu", {b.op("Conv", {v, b.constant(random_tensor({64, 64, 1, 1}, seed, 0.1f))})});
  };
  Value* a = conv(x, 1);
  b.output(b.op("GlobalAveragePool", {b.op("Add", {conv(conv(a, 2), 3), a})}));
  PassOptions o;
  o.cpu = true;
  o.blocked_layout = true;
  run_pipeline(*m, o);
  ASSERT_EQ(count_ops(*m->graph, "ToBlocked"), 3u);
  const CompiledModel c = lower_for_cpu(*m);
  size_t blocked_convs = 0;
  for (const LoweredGroup& lg : c.lowered) {
    if (lg.schedule != "conv_gemm" || lg.kernel.name.find("toblocked") == std::string::npos) continue;
    ++blocked_convs;
    size_t divisions = 0;
    testing::for_each_store_expr(lg.kernel.body, "out", [&](const loop::Expr& e) {
      divisions += e->kind == loop::ExprKind::Binary &&
                   (e->binary == loop::BinaryOp::FloorDiv || e->binary == loop::BinaryOp::FloorMod);
    });
    EXPECT_EQ(divisions, 0u) << lg.kernel.name;
  }
  EXPECT_EQ(blocked_convs, 3u);
}

// A conv over a blocked input takes the positions as its rows; where its
// output would be stored plain and its shapes alone would not make the
// positions the rows (MobileNet's expansion into a depthwise conv: 16 to 96
// channels), its input stays plain, and so, in turn, does the input of the
// conv that made it.
TEST(PassBlockedLayout, KeepsTheInputOfAConvWithAPlainOutputPlain) {
  TS_REQUIRE_OPS("Conv", "Relu", "Add");
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(16), Dim(12), Dim(12)});
  const auto conv = [&](Value* v, int64_t in, int64_t out, unsigned seed) {
    return b.op("Relu", {b.op("Conv", {v, b.constant(random_tensor({out, in, 1, 1}, seed, 0.2f))})});
  };
  Value* a = conv(x, 16, 16, 1);
  Value* e = conv(a, 16, 96, 2);  // into a depthwise conv: stored plain
  Value* d = b.op("Conv", {e, b.constant(random_tensor({96, 1, 3, 3}, 3, 0.2f))},
                  {{"group", Attribute::of_int(96)}, {"pads", ints({1, 1, 1, 1})}});
  b.output(b.op("Add", {conv(d, 96, 16, 4), a}));
  PassOptions o;
  run_pipeline(*m, o);
  EXPECT_FALSE(block_conv_layouts(*m));
}

// With Winograd over the blocked layout (winograd_conv's own ToBlocked of
// its input): the pass makes that the value's block for its other readers
// too, so that no value is blocked twice; the lowered model matches the
// interpreter within the Winograd error.
TEST(PassBlockedLayout, ReusesAReadersBlock) {
  TS_REQUIRE_OPS("Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Pad", "Slice");
  auto m = net({.c = 32, .h = 32});
  auto ref = clone(*m);
  // The block's 3x3 (stride 1, 32 -> 32 channels over 16 x 16, its input padded) as Winograd.
  ASSERT_TRUE(winograd_convs(*m, true));
  ASSERT_TRUE(block_conv_layouts(*m));
  EXPECT_NO_THROW(verify_model(*m));
  std::map<const Value*, int> blocks;
  for (const auto& n : m->graph->nodes())
    if (n->op == "ToBlocked") ++blocks[n->input(0)];
  for (const auto& [v, count] : blocks) EXPECT_EQ(count, 1) << v->name;
  testing::expect_same_results(*ref, *m, {}, 2e-5);
  const testing::EvalRun r = testing::expect_lowered_matches(*m, {}, Tolerance{2e-5, 2e-4});
  EXPECT_EQ(r.interpreted, 0u);
}

// The pipeline runs the pass for the CPU only when asked.
TEST(PassBlockedLayout, RunsWhenAsked) {
  TS_REQUIRE_OPS("Conv");
  for (bool on : {false, true}) {
    auto m = net({});
    PassOptions o;
    o.cpu = true;
    o.blocked_layout = on;
    run_pipeline(*m, o);
    EXPECT_EQ(count_ops(*m->graph, "ToBlocked") > 0, on) << on;
  }
}

}  // namespace
}  // namespace tessel
