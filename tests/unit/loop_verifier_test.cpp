#include <gtest/gtest.h>

#include "loop_test_util.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/verifier.h"
#include "tessel/support/error.h"

namespace tessel::loop {
namespace {

using testing::make_buffer;

void expect_ok(const std::string& text, Target t = Target::Cpu) {
  Kernel k = parse_kernel(text);
  EXPECT_NO_THROW(verify(k, t)) << text;
}

void expect_rejected(const Kernel& k, const std::string& what, Target t = Target::Cpu) {
  try {
    verify(k, t);
    ADD_FAILURE() << "accepted, expected: " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

void expect_rejected(const std::string& text, const std::string& what, Target t = Target::Cpu) {
  expect_rejected(parse_kernel(text), what, t);
}

// A kernel whose body is `body`, with params x (in), y (out), both f32[n].
std::string with_body(const std::string& body) {
  return "kernel k(in %x: f32[n], out %y: f32[n]) syms(n) {\n" + body + "}\n";
}

TEST(LoopVerifier, AcceptsAWellFormedKernel) {
  expect_ok(with_body(
      "  assert n > 0, \"empty\"\n"
      "  let h = floordiv(n, 2)\n"
      "  parallel for i in [0, n) {\n"
      "    allocate %t: f32[8] local\n"
      "    vectorized for v in [0, 8) {\n"
      "      t[v] = x[i]\n"
      "    }\n"
      "    let s = t[0] + t[7]\n"
      "    if i < h {\n"
      "      y[i] = s\n"
      "    } else {\n"
      "      y[i] = exp(s)\n"
      "    }\n"
      "  }\n"));
}

TEST(LoopVerifier, VariablesMustBeInScope) {
  Kernel k = parse_kernel(with_body("  for i in [0, n) {\n    y[i] = x[i]\n  }\n"));
  // Reuse the loop's store outside the loop: i is then unbound.
  k.body = seq({k.body, k.body->body[0]});
  expect_rejected(k, "variable 'i' is not in scope");
}

TEST(LoopVerifier, VariablesKeepTheirBoundType) {
  BufferRef y = make_buffer("y", DType::F32, {4});
  Kernel k;
  k.name = "k";
  k.params = {y};
  k.body = let("t", float_imm(DType::F32, 1), store(y, {0}, cast(DType::F32, var("t", DType::I64))));
  expect_rejected(k, "variable 't' used as i64 but bound as f32");
}

TEST(LoopVerifier, LoopVariablesAreUniqueAndNothingShadows) {
  expect_rejected(with_body("  for i in [0, n) {\n    y[i] = x[i]\n  }\n  for i in [0, n) {\n    y[i] = x[i]\n  }\n"),
                  "loop variable 'i' is used by two loops");
  expect_rejected(with_body("  for n in [0, 4) {\n    y[n] = x[n]\n  }\n"), "'n' is bound again");
  expect_rejected(with_body("  let a = 1\n  let a = 2\n  y[a] = x[a]\n"), "'a' is bound again");
  // Sibling lets may reuse a name.
  expect_ok(with_body("  let a = 1 {\n    y[a] = x[a]\n  }\n  let a = 2\n  y[a] = x[a]\n"));
}

TEST(LoopVerifier, BuffersMustBeParamsOrAllocatedInScope) {
  Kernel k = parse_kernel(with_body("  allocate %t: f32[4] local {\n    t[0] = 1.0f32\n  }\n  y[0] = 2.0f32\n"));
  // Move the store into %t after its allocate.
  const Stmt& inner = k.body->body[0]->body[0];
  k.body = seq({k.body, inner});
  expect_rejected(k, "buffer %t is neither a param nor allocated in scope");
  BufferRef stranger = make_buffer("y", DType::F32, {var("n")});
  Kernel k2 = parse_kernel(with_body(""));
  k2.body = store(stranger, {0}, float_imm(DType::F32, 1));
  expect_rejected(k2, "buffer %y is neither a param");
}

TEST(LoopVerifier, StoreIntoAnInputIsAnError) {
  expect_rejected(with_body("  x[0] = 1.0f32\n"), "store into input param %x");
  expect_ok(with_body("  y[0] = 1.0f32\n"));
}

TEST(LoopVerifier, VectorizedAndUnrolledNeedConstantExtents) {
  expect_rejected(with_body("  vectorized for i in [0, n) {\n    y[i] = x[i]\n  }\n"),
                  "vectorized loop i needs a constant extent");
  expect_rejected(with_body("  unrolled for i in [0, n) {\n    y[i] = x[i]\n  }\n"),
                  "unrolled loop i needs a constant extent");
  expect_ok(with_body("  unrolled for i in [n, n + 4) {\n    y[i - n] = x[i - n]\n  }\n"));
}

TEST(LoopVerifier, ParallelLoopRules) {
  expect_ok(with_body("  let a = 1\n  allocate %t: f32[1] local\n  parallel for i in [0, n) {\n    y[i] = x[i]\n  }\n"));
  expect_rejected(with_body("  parallel for i in [0, n) {\n    y[i] = x[i]\n  }\n"
                            "  parallel for j in [0, n) {\n    y[j] = x[j]\n  }\n"),
                  "second parallel loop j");
  expect_rejected(with_body("  for o in [0, 1) {\n    parallel for i in [0, n) {\n      y[i] = x[i]\n    }\n  }\n"),
                  "parallel loop i is not at the top level");
  expect_rejected(with_body("  if n > 2 {\n    parallel for i in [0, n) {\n      y[i] = x[i]\n    }\n  }\n"),
                  "parallel loop i is not at the top level");
  expect_rejected(with_body("  let h = floordiv(n, 2)\n  parallel for i in [0, h) {\n    y[i] = x[i]\n  }\n"),
                  "use 'h', which is not a sym");
}

TEST(LoopVerifier, GpuAxesOnlyForCuda) {
  const std::string gpu = with_body("  gpu.block.x for b in [0, n) {\n    y[b] = x[b]\n  }\n");
  expect_rejected(gpu, "gpu.block.x, a GPU axis, on the CPU");
  expect_ok(gpu, Target::Cuda);
  expect_rejected(with_body("  parallel for i in [0, n) {\n    y[i] = x[i]\n  }\n"), "parallel loop i in a CUDA kernel",
                  Target::Cuda);
  const std::string shared = with_body("  allocate %s: f32[4] shared\n  s[0] = x[0]\n  y[0] = s[0]\n");
  expect_rejected(shared, "shared buffer %s on the CPU");
  expect_ok(shared, Target::Cuda);
}

TEST(LoopVerifier, IndicesAreI64) {
  BufferRef y = make_buffer("y", DType::F32, {4});
  auto bad = std::make_shared<StmtNode>(*store(y, {0}, float_imm(DType::F32, 1)).node);
  bad->indices = {int_imm(DType::I32, 0)};
  Kernel k;
  k.name = "k";
  k.params = {y};
  k.body = Stmt(bad);
  expect_rejected(k, "index into %y is i32, not i64");
}

TEST(LoopVerifier, TypesAreConsistent) {
  // A hand-built node that bypasses the constructors' checks.
  auto add = std::make_shared<ExprNode>(*(float_imm(DType::F32, 1) + float_imm(DType::F32, 2)).node);
  add->args[1] = float_imm(DType::F64, 2);
  BufferRef y = make_buffer("y", DType::F32, {4});
  Kernel k;
  k.name = "k";
  k.params = {y};
  k.body = store(y, {0}, Expr(add));
  expect_rejected(k, "binary operands differ in type");
  expect_rejected(with_body("  y[0] = frobnicate(x[0])\n"), "unknown intrinsic 'frobnicate'");
  expect_rejected(with_body("  y[0] = pow(x[0])\n"), "wrong number of operands");
  expect_rejected("kernel k(out %y: i32[4]) {\n  y[0] = exp(y[1])\n}\n", "intrinsic on non-float operands");
  expect_rejected("kernel k(out %y: f8e4m3fn[4]) {\n}\n", "does not compute with");
}

TEST(LoopVerifier, AllocatedBuffersHaveConstantShapes) {
  BufferRef t = make_buffer("t", DType::F32, {var("n")}, BufferScope::Local);
  Kernel k = parse_kernel(with_body(""));
  k.body = allocate(t, store(t, {0}, float_imm(DType::F32, 0)));
  expect_rejected(k, "allocated buffer %t needs a constant shape");
}

}  // namespace
}  // namespace tessel::loop
