// split_borders (loop/split_borders.h): window kernels split into borders
// and a test-free interior, run by the evaluator against the original on
// random inputs (the same bytes out), and the shape of the result.
#include "tessel/loop/split_borders.h"

#include <gtest/gtest.h>

#include "loop_test_util.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/visit.h"

namespace tessel {
namespace {

using loop::Kernel;
using loop::testing::run;
using loop::testing::verified_kernel;

void expect_same(const Kernel& before, const Kernel& after) {
  loop::verify(after);
  for (uint32_t seed = 1; seed <= 3; ++seed)
    EXPECT_EQ(run(before, {}, seed), run(after, {}, seed)) << loop::print(after) << " with seed " << seed;
}

// The loops named `var` or a copy of it (var_border, ...) with their
// [min, min + extent) as "min:end", in pre-order.
std::vector<std::string> ranges(const Kernel& k, const std::string& var) {
  std::vector<std::string> out;
  loop::visit_stmt(
      k.body,
      [&](const loop::Stmt& s) {
        if (s->kind != loop::StmtKind::For || (s->var != var && s->var.rfind(var + "_border", 0) != 0)) return;
        int64_t mn = 0, e = 0;
        loop::as_const_int(s->min, &mn);
        loop::as_const_int(s->extent, &e);
        out.push_back(std::to_string(mn) + ":" + std::to_string(mn + e));
      },
      [](const loop::Expr&) {});
  return out;
}

// Whether the loop named `var` tests its variable (a select, min or max
// over an index that mentions it).
bool tests_its_variable(const Kernel& k, const std::string& var) {
  bool found = false;
  loop::visit_stmt(
      k.body,
      [&](const loop::Stmt& s) {
        if (s->kind != loop::StmtKind::For || s->var != var) return;
        loop::visit_stmt(
            s->body[0], [](const loop::Stmt&) {},
            [&](const loop::Expr& root) {
              loop::visit_expr(root, [&](const loop::Expr& e) {
                if (e->kind != loop::ExprKind::Binary || e->args[0].dtype() != DType::I64) return;
                const auto op = e->binary;
                const bool test = op == loop::BinaryOp::Min || op == loop::BinaryOp::Max ||
                                  op == loop::BinaryOp::Lt || op == loop::BinaryOp::Ge;
                found = found || (test && (loop::mentions_var(e->args[0], var) || loop::mentions_var(e->args[1], var)));
              });
            });
      },
      [](const loop::Expr&) {});
  return found;
}

// A Pad by 1 (left) and 2 (right) of 10 rows of 13: the interior [1, 14)
// reads x[i, j - 1] unclamped.
const char* kPad =
    "kernel pad(in %x: f32[10, 13], out %o: f32[10, 16]) {\n"
    "  for i in [0, 10) {\n"
    "    for j in [0, 16) {\n"
    "      o[i, j] = select(j + -1 >= 0 & j + -1 < 13, x[i, max(min(j + -1, 12), 0)], 0.0f32)\n"
    "    }\n"
    "  }\n"
    "}\n";

TEST(SplitBorders, PadGetsAnInteriorWithoutTests) {
  const Kernel k = verified_kernel(kPad);
  const Kernel s = loop::split_borders(k);
  EXPECT_EQ(ranges(s, "j"), (std::vector<std::string>{"0:1", "1:14", "14:16"})) << loop::print(s);
  EXPECT_FALSE(tests_its_variable(s, "j")) << loop::print(s);
  EXPECT_TRUE(tests_its_variable(k, "j"));
  expect_same(k, s);
}

// A 3x3 max pool, stride 2, pad 1, over 9 x 11: the column loop holds the
// window loops (renamed in the border copies) and a local accumulator; the
// row loop is split too, and its interior holds the split column loop (its
// borders the original one). The last window of each axis reaches past the
// input (rows 7-9 of 9, columns 9-11 of 11): a border on both sides.
const char* kPool =
    "kernel pool(in %x: f32[9, 11], out %o: f32[5, 6]) {\n"
    "  for r in [0, 5) {\n"
    "    for c in [0, 6) {\n"
    "      allocate %acc: f32[1] local {\n"
    "        acc[0] = -inff32\n"
    "        for kr in [0, 3) {\n"
    "          for kc in [0, 3) {\n"
    "            acc[0] = max(acc[0], select(r * 2 + kr + -1 >= 0 & r * 2 + kr + -1 < 9 & c * 2 + kc + -1 >= 0 &"
    " c * 2 + kc + -1 < 11, x[max(min(r * 2 + kr + -1, 8), 0), max(min(c * 2 + kc + -1, 10), 0)], -inff32))\n"
    "          }\n"
    "        }\n"
    "        o[r, c] = acc[0]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

TEST(SplitBorders, PoolingWindowsNestedLoopsAndLocals) {
  const Kernel k = verified_kernel(kPool);
  const Kernel s = loop::split_borders(k);
  EXPECT_EQ(ranges(s, "r"), (std::vector<std::string>{"0:1", "1:4", "4:5"})) << loop::print(s);
  EXPECT_EQ(ranges(s, "c"), (std::vector<std::string>{"0:6", "0:1", "1:5", "5:6", "0:6"})) << loop::print(s);
  EXPECT_FALSE(tests_its_variable(s, "c"));
  EXPECT_FALSE(tests_its_variable(s, "r"));
  expect_same(k, s);
}

// Nothing to split: no tests; tests that hold nowhere in the middle (a
// parity test); a loop whose extent is symbolic.
TEST(SplitBorders, LeavesLoopsWithoutBorders) {
  for (const char* text : {
           "kernel a(in %x: f32[16], out %o: f32[16]) {\n  for j in [0, 16) {\n    o[j] = x[j] * 2.0f32\n  }\n}\n",
           "kernel b(in %x: f32[16], out %o: f32[16]) {\n  for j in [0, 16) {\n"
           "    o[j] = select(floormod(j, 2) == 0, x[j], 0.0f32)\n  }\n}\n",
           "kernel c(in %x: f32[n], out %o: f32[n]) syms(n) {\n  for j in [0, n) {\n"
           "    o[j] = select(j + -1 >= 0, x[max(j + -1, 0)], 0.0f32)\n  }\n}\n",
       }) {
    const Kernel k = verified_kernel(text);
    EXPECT_EQ(loop::print(loop::split_borders(k)), loop::print(k));
  }
}

}  // namespace
}  // namespace tessel
