// The structural hash of loop IR (loop/hash.h): kernels that differ only in
// names hash equal and compare structurally equal; every change that alters
// what a kernel does changes the hash; and the driver shares the code of
// kernels that differ only in names (driver/compiler.cpp).
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "loop_test_util.h"
#include "pass_test_util.h"
#include "tessel/driver/compiler.h"
#include "tessel/ir/builder.h"
#include "tessel/loop/hash.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/visit.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/schedule/schedule.h"
#ifdef TESSEL_HAVE_CODEGEN_CPU
#include "tessel/codegen/cpu/cpu_codegen.h"
#include "tessel/runtime/executable.h"
#endif

namespace tessel::loop {

// For gtest's messages: the hex, not the object's bytes.
void PrintTo(const StructuralHash& h, std::ostream* os) { *os << h.hex(); }

namespace {

using testing::verified_kernel;

// Every node kind a CPU kernel has: an assert, a parallel loop, a local
// buffer, a vectorized loop with a let, a select, an intrinsic, casts, an
// unrolled loop around a serial one.
const char* kFused =
    "kernel fused(in %x: f32[n, 16], in %y: f32[16], in %m: i32[16], out %z: f32[n, 16]) syms(n) {\n"
    "  assert n >= 1, \"n must be positive\"\n"
    "  parallel for i in [0, n) {\n"
    "    allocate %t: f32[16] local\n"
    "    vectorized for j in [0, 16) {\n"
    "      let s = x[i, j] * 0.5f32 + y[j]\n"
    "      t[j] = select(s > 0.0f32, s, fma(s, s, cast<f32>(m[j])))\n"
    "    }\n"
    "    unrolled for j2 in [0, 4) {\n"
    "      for k in [0, 4) {\n"
    "        z[i, j2 * 4 + k] = t[j2 * 4 + k] + cast<f32>(cast<i32>(t[k]))\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

// `text` with the identifiers `names` maps replaced all at once (so {a: b,
// b: a} swaps them); string literals and the words after a dot (gpu.block.x)
// are left alone.
std::string rename(const std::string& text, const std::map<std::string, std::string>& names) {
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '"') {
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      out.append(text, i, end + 1 - i);
      i = end + 1;
      continue;
    }
    const bool starts = (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_') &&
                        (i == 0 || !(word_char(text[i - 1]) || text[i - 1] == '.'));
    if (!starts) {
      out += text[i++];
      continue;
    }
    size_t end = i;
    while (end < text.size() && word_char(text[end])) ++end;
    const std::string word = text.substr(i, end - i);
    const auto it = names.find(word);
    out += it == names.end() ? word : it->second;
    i = end;
  }
  return out;
}

void expect_same(const Kernel& a, const Kernel& b) {
  EXPECT_NE(print(a), print(b)) << "the renaming changed nothing: the test shows nothing";
  EXPECT_EQ(structural_hash(a), structural_hash(b)) << print(a) << print(b);
  EXPECT_TRUE(structurally_equal(a, b));
}

// Each (from, to) replaced once in `base` gives a kernel that verifies and
// hashes differently from `base` and from every other variant.
void expect_each_change_matters(const std::string& base, const std::vector<std::pair<std::string, std::string>>& changes,
                                Target target = Target::Cpu) {
  const Kernel k = parse_kernel(base);
  std::set<std::string> hashes{structural_hash(k).hex()};
  for (const auto& [from, to] : changes) {
    std::string text = base;
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    Kernel v;
    ASSERT_NO_THROW(v = parse_kernel(text)) << text;
    ASSERT_NO_THROW(verify(v, target)) << text;
    EXPECT_NE(structural_hash(v), structural_hash(k)) << from << " -> " << to;
    EXPECT_FALSE(structurally_equal(v, k)) << from << " -> " << to;
    EXPECT_TRUE(hashes.insert(structural_hash(v).hex()).second) << from << " -> " << to << " hashes like another change";
  }
}

TEST(LoopHash, RenamedKernelsHashEqual) {
  const Kernel k = verified_kernel(kFused);
  // The kernel, every buffer, loop and let variable renamed; i and j swap
  // names, y takes x's: only the numbering by definition tells them apart.
  const Kernel renamed = verified_kernel(rename(kFused, {{"fused", "other"}, {"x", "in0"}, {"y", "x"}, {"m", "w"},
                                                         {"z", "out"}, {"t", "scratch"}, {"i", "j"}, {"j", "i"},
                                                         {"s", "v"}, {"j2", "u"}, {"k", "q"}}));
  expect_same(k, renamed);
  const StructuralHash h = structural_hash(k);
  EXPECT_EQ(h.hex().size(), 32u);
  EXPECT_NE(h.hi, h.lo);
  EXPECT_EQ(structural_hash(parse_kernel(print(k))), h);  // independent of the BufferRef objects
}

TEST(LoopHash, EveryChangeThatMattersChangesTheHash) {
  expect_each_change_matters(
      kFused, {
                  {"x[i, j]", "x[i, 15 - j]"},                                     // an index
                  {"t[j2 * 4 + k] +", "t[k * 4 + j2] +"},                          // which loop variable
                  {"for k in [0, 4)", "for k in [0, 3)"},                          // a loop extent
                  {"for k in [0, 4)", "for k in [1, 4)"},                          // a loop min
                  {"parallel for i", "for i"},                                     // loop kinds
                  {"vectorized for j", "for j"},
                  {"unrolled for j2", "vectorized for j2"},
                  {"in %m: i32[16]", "in %m: i64[16]"},                            // a buffer's dtype
                  {"cast<i32>(t[k])", "cast<i16>(t[k])"},                          // an expression's dtype
                  {"in %y: f32[16]", "in %y: f32[17]"},                            // a buffer's shape
                  {"%t: f32[16] local", "%t: f32[17] local"},                      // a local buffer's shape
                  {"in %x: f32[n, 16], in %y: f32[16]", "in %y: f32[16], in %x: f32[n, 16]"},  // param order
                  {"in %m: i32[16]", "out %m: i32[16]"},                           // input or output
                  {"0.5f32", "0.25f32"},                                           // a constant
                  {"s > 0.0f32", "s > -0.0f32"},                                   // floats bitwise
                  {"* 0.5f32 +", "* 0.5f32 -"},                                    // an operator
                  {"fma(s, s, ", "fma(s, -s, "},                                   // a node kind
                  {"fma(s, s, cast<f32>(m[j]))", "copysign(s, cast<f32>(m[j]))"},  // an intrinsic
                  {"n must be positive", "n must be at least 1"},                  // the error reported
              });
  // Syms are bound by name at run time (a CUDA launch's grid): not renamable.
  EXPECT_NE(structural_hash(parse_kernel(kFused)), structural_hash(parse_kernel(rename(kFused, {{"n", "batch"}}))));
}

TEST(LoopHash, GpuAxesAndSharedBuffers) {
  const std::string text =
      "kernel g(in %a: f16[256], out %o: f16[256]) {\n"
      "  gpu.block.x for b in [0, 2) {\n"
      "    gpu.thread.x for t in [0, 128) {\n"
      "      allocate %s: f16[128] shared\n"
      "      s[t] = a[b * 128 + t]\n"
      "      o[b * 128 + t] = s[127 - t]\n"
      "    }\n"
      "  }\n"
      "}\n";
  expect_same(parse_kernel(text), parse_kernel(rename(text, {{"b", "t"}, {"t", "b"}, {"s", "cache"}, {"a", "x"}})));
  expect_each_change_matters(text,
                             {
                                 {"gpu.block.x for", "gpu.block.y for"},
                                 {"gpu.thread.x for", "gpu.thread.y for"},
                                 {"f16[128] shared", "f16[128] local"},
                             },
                             Target::Cuda);
}

TEST(LoopHash, ContractAndAttentionBindTheirVariables) {
  const std::string contract =
      "kernel bmm(in %x: f32[3, m, 5], in %w: f32[3, 5, 4], out %o: f32[3, m, 4]) syms(m) {\n"
      "  contract b in [0, 3), i in [0, m), j in [0, 4), k in [0, 5): acc = dot(x[b, i, k], w[b, k, j]) {\n"
      "    o[b, i, j] = max(acc, 0.0f32)\n"
      "  }\n"
      "}\n";
  expect_same(parse_kernel(contract),
              parse_kernel(rename(contract, {{"b", "bb"}, {"i", "j"}, {"j", "i"}, {"k", "r"}, {"acc", "sum"}})));
  expect_each_change_matters(contract, {
                                           {"k in [0, 5)", "k in [0, 4)"},
                                           {"w[b, k, j]", "w[b, k, 0]"},
                                           {"max(acc, 0.0f32)", "max(acc, 1.0f32)"},
                                       });
  const std::string attention =
      "kernel att(in %q: f32[4, 3], in %k: f32[5, 3], in %v: f32[5, 2], out %o: f32[4, 2]) {\n"
      "  attention b in [0, 1), i in [0, 4), j in [0, 5), d in [0, 3), e in [0, 2): acc = softmax_dot(q[i, d], "
      "k[j, d], v[j, e], 0.5f32, 0.0f32, f32) {\n"
      "    o[i, e] = acc\n"
      "  }\n"
      "}\n";
  expect_same(parse_kernel(attention),
              parse_kernel(rename(attention, {{"d", "e"}, {"e", "d"}, {"acc", "out"}, {"q", "query"}})));
  expect_each_change_matters(attention, {
                                            {"0.5f32, 0.0f32, f32)", "0.5f32, 0.0f32, bf16)"},  // p_type
                                            {"0.5f32, 0.0f32, f32)", "0.25f32, 0.0f32, f32)"},  // scale
                                            {"e in [0, 2)", "e in [0, 1)"},
                                        });
}

}  // namespace
}  // namespace tessel::loop

namespace tessel {
namespace {

// x1 and x2 through the same elementwise op: two groups, one kernel body.
std::unique_ptr<Model> twin_relu_model() {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  for (const char* name : {"x1", "x2"}) b.output(b.op("Relu", {b.input(name, DType::F32, {Dim::sym("batch"), 64})}));
  run_pipeline(*m, PassOptions{});
  return m;
}

// The default CPU lowering, with the loop and let variables of every kernel
// after the first renamed: kernels that differ only in names.
GroupLowering renaming_lowering() {
  auto count = std::make_shared<int>(0);
  return [count](const FusionGroup& g, const OpRegistry& reg) {
    LoweredGroup lg = lower_cpu_group(g, reg);
    if ((*count)++ > 0) {
      std::set<std::string> taken = loop::names_in(lg.kernel.body);
      lg.kernel.body = loop::rename_bound(lg.kernel.body, "_renamed", &taken);
    }
    return lg;
  };
}

TEST(LoopHash, KernelsThatDifferOnlyInNamesShareOneFunction) {
  const auto m = twin_relu_model();
  const CompiledModel c = lower_model(*m, renaming_lowering());
  ASSERT_EQ(c.lowered.size(), 2u);
  loop::Kernel first = c.lowered[0].kernel, second = c.lowered[1].kernel;
  second.name = first.name;
  ASSERT_NE(loop::print(first), loop::print(second)) << "not renamed: the test shows nothing";
  ASSERT_EQ(c.unique_kernels.size(), 1u);
  EXPECT_EQ(c.entry.at(c.lowered[1].kernel.name), c.lowered[0].kernel.name);
  LowerOptions separate;
  separate.share_kernels = false;
  EXPECT_EQ(lower_model(*m, renaming_lowering(), separate).unique_kernels.size(), 2u);

  // A kernel of another shape (the second Relu over 32 columns) is not shared.
  auto other = std::make_unique<Model>();
  GraphBuilder b(*other);
  b.output(b.op("Relu", {b.input("x1", DType::F32, {Dim::sym("batch"), 64})}));
  b.output(b.op("Relu", {b.input("x2", DType::F32, {Dim::sym("batch"), 32})}));
  run_pipeline(*other, PassOptions{});
  EXPECT_EQ(lower_model(*other, renaming_lowering()).unique_kernels.size(), 2u);
}

#ifdef TESSEL_HAVE_CODEGEN_CPU
// The shared function runs the second group on its own buffers: the same
// results, bit for bit, as the plain compile.
TEST(LoopHash, SharedRenamedKernelRunsLikeItsOwn) {
  const auto m = twin_relu_model();
  const CompiledModel c = lower_model(*m, renaming_lowering());
  ASSERT_EQ(c.unique_kernels.size(), 1u);
  std::shared_ptr<const cpu::KernelLibrary> lib = cpu::compile_kernels(c.unique_kernels, {});
  std::vector<Step> steps =
      build_steps(c, [&](const std::string& name) { return reinterpret_cast<KernelEntry>(lib->lookup(name)); });
  const Executable shared(*m, std::move(steps), lib);
  const auto plain = compile_for_cpu(*m, DriverOptions{});
  const std::vector<RtValue> in = testing::random_inputs(*m->graph, {{"batch", 5}}, 7);
  const std::vector<RtValue> got = shared.run(in), want = plain->exe->run(in);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i].tensor.bitwise_equal(want[i].tensor)) << i;
  EXPECT_FALSE(got[0].tensor.bitwise_equal(got[1].tensor));  // the inputs differ, so must the outputs
}
#endif

// A schedule knob that changes the kernel changes its hash (the tuning
// database's key is the default schedule's kernel, this keeps tuned ones apart).
TEST(LoopHash, ScheduleKnobsChangeTheHash) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  b.output(b.op("Relu", {b.input("x", DType::F32, {Dim::sym("batch"), 64})}));
  run_pipeline(*m, PassOptions{});
  std::set<std::string> hashes;
  for (const char* knob : {"nest.vector.width=4", "nest.vector.width=8", "nest.parallel.on=0"}) {
    LowerOptions lo;
    lo.knobs = {parse_knob(knob)};
    const CompiledModel c = lower_for_cpu(*m, lo);
    ASSERT_EQ(c.lowered.size(), 1u);
    EXPECT_TRUE(hashes.insert(loop::structural_hash(c.lowered[0].kernel).hex()).second) << knob;
    EXPECT_EQ(c.lowered[0].default_hash, kernel_hash(lower_for_cpu(*m).lowered[0].kernel)) << knob;
  }
}

}  // namespace
}  // namespace tessel
