// Memory planning (runtime/memory_plan.h): packing never overlaps two live
// buffers (checked by brute force on random interval sets and on real
// models), the arena is no larger than one allocation per value, in-place
// reuse happens only where the header allows it, and results are bitwise the
// same with and without the arena.
#include <gtest/gtest.h>

#include <random>

#include "pass_test_util.h"
#include "runtime_test_util.h"
#include "tessel/driver/compiler.h"
#include "tessel/runtime/memory_plan.h"

namespace tessel {
namespace {

int64_t aligned(int64_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

bool live_together(size_t a_first, size_t a_last, size_t b_first, size_t b_last) {
  return a_first <= b_last && b_first <= a_last;
}

bool bytes_overlap(int64_t a_off, int64_t a_size, int64_t b_off, int64_t b_size) {
  return a_size > 0 && b_size > 0 && a_off < b_off + b_size && b_off < a_off + a_size;
}

void expect_valid_layout(const std::vector<BufferRequest>& reqs, const ArenaLayout& l) {
  ASSERT_EQ(l.offsets.size(), reqs.size());
  int64_t sum = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(l.offsets[i] % kArenaAlignment, 0);
    EXPECT_LE(l.offsets[i] + reqs[i].size, l.peak);
    sum += aligned(reqs[i].size);
    for (size_t j = i + 1; j < reqs.size(); ++j)
      if (live_together(reqs[i].first, reqs[i].last, reqs[j].first, reqs[j].last))
        EXPECT_FALSE(bytes_overlap(l.offsets[i], reqs[i].size, l.offsets[j], reqs[j].size))
            << "buffers " << i << " and " << j << " overlap";
  }
  EXPECT_LE(l.peak, sum);
}

TEST(RuntimeMemoryPlan, RandomIntervalSetsNeverOverlap) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 1 + rng() % 40;
    std::vector<BufferRequest> reqs(n);
    for (BufferRequest& r : reqs) {
      r.size = (rng() % 8 == 0) ? 0 : static_cast<int64_t>(rng() % 5000);
      r.first = rng() % 20;
      r.last = r.first + rng() % 8;
    }
    SCOPED_TRACE(trial);
    expect_valid_layout(reqs, pack_buffers(reqs));
  }
}

TEST(RuntimeMemoryPlan, DisjointLifetimesShareBytes) {
  // Three buffers one after another: each fits where the previous one was.
  const std::vector<BufferRequest> reqs = {{1000, 0, 1}, {1000, 2, 3}, {1000, 4, 5}};
  const ArenaLayout l = pack_buffers(reqs);
  expect_valid_layout(reqs, l);
  EXPECT_EQ(l.peak, aligned(1000));
}

TEST(RuntimeMemoryPlan, BestFitUsesTheTightestGap) {
  // Big buffers 0 and 2 leave a 128-byte hole around the long-lived 1; the
  // late small buffer goes into a hole instead of on top.
  const std::vector<BufferRequest> reqs = {{4096, 0, 9}, {128, 0, 9}, {4096, 0, 2}, {64, 5, 9}};
  const ArenaLayout l = pack_buffers(reqs);
  expect_valid_layout(reqs, l);
  EXPECT_LE(l.peak, 4096 + 4096 + 128);
}

// Checks a real model's plan: distinct buffers of values live together never
// overlap, except an in-place output and the input it replaces.
void expect_valid_plan(const MemoryPlan& p) {
  int64_t sum = 0;
  for (size_t i = 0; i < p.values.size(); ++i) {
    const PlannedValue& a = p.values[i];
    EXPECT_EQ(a.offset % kArenaAlignment, 0);
    EXPECT_LE(a.offset + a.bytes, p.peak_bytes);
    sum += aligned(a.bytes);
    for (size_t j = i + 1; j < p.values.size(); ++j) {
      const PlannedValue& b = p.values[j];
      if (b.reuses == a.value || a.reuses == b.value) continue;
      if (live_together(a.first, a.last, b.first, b.last))
        EXPECT_FALSE(bytes_overlap(a.offset, a.bytes, b.offset, b.bytes))
            << "%" << a.value->name << " and %" << b.value->name;
    }
  }
  EXPECT_EQ(sum, p.total_bytes);
  EXPECT_LE(p.peak_bytes, p.total_bytes);
}

#ifdef TESSEL_HAVE_CODEGEN_CPU
std::vector<Tensor> run_with(const Model& m, const std::vector<RtValue>& in, bool planning) {
  DriverOptions o;
  o.threads = 2;
  o.memory_planning = planning;
  std::unique_ptr<CompiledModel> c = compile_for_cpu(m, o);
  std::vector<Tensor> out;
  for (RtValue& v : c->exe->run(in)) out.push_back(v.tensor);
  return out;
}

void expect_arena_changes_nothing(const Model& m, const std::map<std::string, int64_t>& dims) {
  const std::vector<RtValue> in = testing::random_inputs(*m.graph, dims, 3);
  const std::vector<Tensor> with = run_with(m, in, true), without = run_with(m, in, false);
  ASSERT_EQ(with.size(), without.size());
  for (size_t i = 0; i < with.size(); ++i) EXPECT_TRUE(with[i].bitwise_equal(without[i])) << "output " << i;
}

TEST(RuntimeMemoryPlan, MlpPlanIsValidAndResultsMatch) {
  auto m = testing::mlp_softmax_model();
  for (int64_t batch : {1, 7, 64}) {
    DriverOptions o;
    std::unique_ptr<CompiledModel> c = compile_for_cpu(*m, o);
    const auto plan = c->exe->memory_plan({{"batch", batch}});
    expect_valid_plan(*plan);
    EXPECT_EQ(plan, c->exe->memory_plan({{"batch", batch}})) << "plans are cached per binding";
    expect_arena_changes_nothing(*m, {{"batch", batch}});
  }
}

TEST(RuntimeMemoryPlan, InPlaceOnlyForElementwiseKernelsAndNotForInterpreterValues) {
  auto m = testing::branchy_model();
  DriverOptions o;
  std::unique_ptr<CompiledModel> c = compile_for_cpu(*m, o);
  const std::vector<Step>& steps = c->exe->steps();
  const auto plan = c->exe->memory_plan({{"batch", 5}});
  expect_valid_plan(*plan);
  bool in_place = false;
  for (const PlannedValue& v : plan->values) {
    const KernelStep& k = *steps.at(v.first).kernel;
    if (v.reuses) {
      in_place = true;
      EXPECT_TRUE(k.elementwise) << k.name;
    }
    for (const Step& s : steps)
      if (s.interp)
        for (const Value* in : s.interp->inputs) EXPECT_NE(in, v.value) << "the interpreter reads %" << in->name;
    for (const Value* out : m->graph->outputs) EXPECT_NE(out, v.value);
  }
  EXPECT_TRUE(in_place) << print_memory_plan(*plan, {{"batch", 5}});
  expect_arena_changes_nothing(*m, {{"batch", 5}});
}
#endif

}  // namespace
}  // namespace tessel
