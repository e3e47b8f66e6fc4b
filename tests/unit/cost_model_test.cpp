// The tuner's cost model (tune/cost_model.h): the analytical GEMM roofline
// orders the schedules it can tell apart the way the hardware does, the
// learned trees fit a correction the roofline cannot express (an
// interaction of two knobs), and the search space keeps to legal schedules.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include <algorithm>
#include <cmath>
#include <random>

#include "tessel/schedule/gemm.h"
#include "tessel/schedule/schedule.h"
#include "tessel/tune/cost_model.h"
#include "tessel/tune/space.h"

namespace tessel {
namespace {

CpuInfo avx512() {
  CpuInfo c = cpu_info_from_features("+avx,+avx2,+fma,+avx512f");
  c.l1d_bytes = 32 * 1024;
  c.l2_bytes = 1024 * 1024;
  c.cores = 2;
  return c;
}

Schedule gemm(int mr, int nr, int lanes, int mc, int kc, int nc, const char* mode, int pack_a, int pack_b = 1) {
  GemmSchedule g;
  g.mr = mr;
  g.nr = nr;
  g.vector_lanes = lanes;
  g.mc = mc;
  g.kc = kc;
  g.nc = nc;
  g.parallel_over_m_blocks = std::string(mode) != "serial";
  g.parallel_over_n_blocks = std::string(mode) == "tiles";
  g.pack_a = pack_a != 0;
  g.pack_b = pack_b != 0;
  Schedule s{"gemm", {}};
  add_gemm_knobs(g, &s);
  check_schedule(s);
  return s;
}

KernelFacts bert_ffn() {
  KernelFacts f;
  f.kind = "gemm";
  f.m = 128;
  f.n = 3072;
  f.k = 768;
  return f;
}

TEST(CostModel, RooflineOrdersWhatItModels) {
  const CpuInfo cpu = avx512();
  CpuCeilings c;
  const KernelFacts f = bert_ffn();
  const auto cost = [&](const Schedule& s) { return analytical_cost_us(s, f, cpu, c); };
  // One M block of 128 rows: over M blocks only one thread works; over
  // (M, N) tiles both do.
  EXPECT_GT(cost(gemm(8, 32, 16, 128, 256, 512, "m_blocks", 1)), 1.5 * cost(gemm(8, 32, 16, 128, 256, 512, "tiles", 1)));
  // 24 K blocks carry the partial sums through memory 23 times, 6 blocks 5
  // times (both B micro-panels fit L1).
  EXPECT_GT(cost(gemm(8, 32, 16, 128, 32, 512, "tiles", 1)), cost(gemm(8, 32, 16, 128, 128, 512, "tiles", 1)));
  // Too few accumulators to cover the FMA latency.
  EXPECT_GT(cost(gemm(1, 16, 16, 128, 256, 512, "tiles", 1)), cost(gemm(8, 32, 16, 128, 256, 512, "tiles", 1)));
  // A prepacked B read in place skips the copy.
  EXPECT_LT(cost(gemm(4, 64, 16, 128, 256, 128, "tiles", 0, 0)), cost(gemm(4, 64, 16, 128, 256, 128, "tiles", 0, 1)));
  // Every cost is positive and finite.
  for (const Schedule& s : search_space(gemm(8, 32, 16, 128, 256, 512, "tiles", 1), f, cpu)) {
    const double us = cost(s);
    EXPECT_TRUE(std::isfinite(us) && us > 0) << print_schedule(s);
  }
}

TEST(CostModel, LearnedTreesFitAnInteraction) {
  // Measured = analytical x (2 when features 0 and 1 are both above 0.5,
  // else 1): a product of two conditions, which no sum of per-feature terms
  // gives. The trees must rank a held-out sample's pair right.
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  LearnedCostModel m;
  const auto truth = [](const std::vector<double>& x) { return x[0] > 0.5 && x[1] > 0.5 ? 2.0 : 1.0; };
  for (int i = 0; i < 400; ++i) {
    std::vector<double> x{u(rng), u(rng), u(rng)};
    m.add(x, 10.0, 10.0 * truth(x));
  }
  EXPECT_EQ(m.predict_us({0.9, 0.9, 0.1}, 10.0), 10.0);  // before fit: the analytical cost
  m.fit();
  EXPECT_NEAR(m.predict_us({0.9, 0.9, 0.1}, 10.0), 20.0, 2.0);
  EXPECT_NEAR(m.predict_us({0.9, 0.1, 0.1}, 10.0), 10.0, 1.0);
  EXPECT_NEAR(m.predict_us({0.1, 0.9, 0.9}, 10.0), 10.0, 1.0);
  // Too few samples: no fit, the analytical cost unchanged.
  LearnedCostModel few;
  few.add({1, 2, 3}, 5.0, 50.0);
  few.fit();
  EXPECT_EQ(few.predict_us({1, 2, 3}, 5.0), 5.0);
  // Features of another length (another model's trials) are not trusted.
  EXPECT_EQ(m.predict_us({0.9, 0.9}, 10.0), 10.0);
}

TEST(CostModel, SpaceHoldsOnlyLegalSchedules) {
  const CpuInfo cpu = avx512();
  KernelFacts f = bert_ffn();
  f.b_panel_width = 16;
  f.b_panel_columns = 3072;
  const Schedule def = gemm(8, 32, 16, 128, 128, 512, "tiles", 1, 0);
  const std::vector<Schedule> space = search_space(def, f, cpu);
  ASSERT_GT(space.size(), 100u);
  EXPECT_EQ(space[0], def);
  size_t in_place = 0;
  for (const Schedule& s : space) {
    EXPECT_NO_THROW(check_schedule(s)) << print_schedule(s);
    const Primitive* t = s.find("gemm.tile");
    const Primitive* p = s.find("gemm.pack");
    ASSERT_TRUE(t && p);
    // B is read in place exactly where the tile reads whole 16-wide panels.
    const int64_t nr = t->int_attr("nr", 0), lanes = t->int_attr("lanes", 0);
    EXPECT_EQ(p->int_attr("b", 1) == 0, nr % 16 == 0 && 16 % lanes == 0) << print_schedule(s);
    in_place += p->int_attr("b", 1) == 0;
  }
  EXPECT_GT(in_place, 0u);
  // Neighbours differ in one or two knob values and come from the space.
  for (const Schedule& n : neighbours(def, space)) EXPECT_NE(std::find(space.begin(), space.end(), n), space.end());
}

// A GEMV (M = 1) has tiles one row tall in its space, each within the
// register file (before, every tile was taller than the product and the space
// held only the default).
TEST(CostModel, SpaceOfAGemvHasTilesOfItsHeight) {
  const CpuInfo cpu = avx512();
  KernelFacts f = bert_ffn();
  f.m = 1;
  const Schedule def = gemm(1, 64, 16, 1, 64, 512, "tiles", 1, 0);
  const std::vector<Schedule> space = search_space(def, f, cpu);
  std::set<int64_t> widths;
  for (const Schedule& s : space) {
    const Primitive* t = s.find("gemm.tile");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->int_attr("mr", 0), 1) << print_schedule(s);
    widths.insert(t->int_attr("nr", 0));
  }
  EXPECT_GE(widths.size(), 3u);  // 16, 32, 48, 64 columns (and the 8-lane ones)
  EXPECT_GT(space.size(), 10u);
}

// A convolution's space holds both orientations of its GEMM: its own with
// the prepacked panels read in place, the other with M and N swapped and B
// packed (its weights are not panels for it).
TEST(CostModel, ConvolutionSpaceHoldsBothOrientations) {
  const CpuInfo cpu = avx512();
  KernelFacts f;
  f.kind = "conv_gemm";
  f.m = 49;    // positions
  f.n = 512;   // channels
  f.k = 4608;
  f.b_panel_width = 16;
  f.b_panel_columns = 512;
  Schedule def = gemm(4, 64, 16, 52, 128, 256, "tiles", 0, 0);
  def.kind = "conv_gemm";
  def.get("conv.gemm").set("rows", "positions");
  const std::vector<Schedule> space = search_space(def, f, cpu);
  EXPECT_EQ(space[0], def);
  std::map<std::string, size_t> per_rows, packed_b;
  for (const Schedule& s : space) {
    EXPECT_NO_THROW(check_schedule(s)) << print_schedule(s);
    ASSERT_TRUE(s.find("conv.gemm"));
    const std::string rows = s.find("conv.gemm")->attr("rows").value_or("");
    ++per_rows[rows];
    packed_b[rows] += s.find("gemm.pack")->int_attr("b", 0);
    // A tile taller than the rows is not searched: 49 rows for positions,
    // 512 for channels.
    if (rows == "positions") EXPECT_LE(s.find("gemm.tile")->int_attr("mr", 0), 50) << print_schedule(s);
  }
  EXPECT_GT(per_rows["positions"], 20u);
  EXPECT_GT(per_rows["channels"], 20u);
  EXPECT_EQ(packed_b["channels"], per_rows["channels"]);
  EXPECT_LT(packed_b["positions"], per_rows["positions"]);
  // The cost model sees a candidate of the other orientation with M and N
  // swapped: the same as facts written for that orientation.
  f.conv_rows = "positions";
  KernelFacts channels = f;
  std::swap(channels.m, channels.n);
  channels.conv_rows = "channels";
  channels.b_panel_width = channels.b_panel_columns = 0;
  Schedule other = gemm(8, 32, 16, 512, 256, 64, "tiles", 1, 1);
  other.kind = "conv_gemm";
  other.get("conv.gemm").set("rows", "channels");
  CpuCeilings c;
  EXPECT_EQ(analytical_cost_us(other, f, cpu, c), analytical_cost_us(other, channels, cpu, c));
  EXPECT_NE(analytical_cost_us(other, f, cpu, c), analytical_cost_us(def, f, cpu, c));
  EXPECT_EQ(schedule_features(other, f, cpu, c).back(), 0.0);
  EXPECT_EQ(schedule_features(def, f, cpu, c).back(), 1.0);
}

// A depthwise kernel's space: rows per block 1-4 and 8 or 16 lanes on an
// AVX-512 target, each with the parallel loop on and off, all valid.
TEST(CostModel, DepthwiseSpaceHoldsRowBlocksAndVectorWidths) {
  const CpuInfo cpu = avx512();
  KernelFacts f;
  f.kind = "depthwise";
  Schedule def;
  def.kind = "depthwise";
  def.get("depthwise.tile").set("rows", 2);
  def.get("depthwise.tile").set("lanes", 16);
  def.get("nest.parallel").set("on", 1);
  const std::vector<Schedule> space = search_space(def, f, cpu);
  EXPECT_EQ(space[0], def);
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  for (const Schedule& s : space) {
    EXPECT_NO_THROW(check_schedule(s)) << print_schedule(s);
    const Primitive* t = s.find("depthwise.tile");
    ASSERT_TRUE(t);
    seen.insert({t->int_attr("rows", 0), t->int_attr("lanes", 0), s.find("nest.parallel")->int_attr("on", 0)});
  }
  EXPECT_EQ(seen.size(), 4u * 2u * 2u);
  EXPECT_EQ(space.size(), seen.size());
  // The learned model tells the candidates apart by their features.
  std::set<std::vector<double>> features;
  for (const Schedule& s : space) features.insert(schedule_features(s, f, cpu, CpuCeilings{}));
  EXPECT_EQ(features.size(), space.size());
}

}  // namespace
}  // namespace tessel
