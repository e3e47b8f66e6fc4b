// The LLVM CPU code generator: kernels built with the loop IR constructors,
// compiled and run, checked against plain C++ (and Tensor::cast for casts).
#ifdef TESSEL_HAVE_CODEGEN_CPU

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include <unistd.h>

#include "tessel/codegen/cpu/cpu_codegen.h"
#include "tessel/ir/tensor.h"
#include "tessel/support/error.h"
#include "loop_test_util.h"

namespace tessel::cpu {
namespace {

using namespace tessel::loop;  // NOLINT

BufferRef buffer(const std::string& name, DType t, std::vector<Expr> shape, BufferScope scope = BufferScope::Param) {
  return testing::make_buffer(name, t, std::move(shape), scope);
}

Kernel kernel(const std::string& name, std::vector<BufferRef> params, size_t num_inputs, std::vector<std::string> syms,
              Stmt body) {
  Kernel k;
  k.name = name;
  k.params = std::move(params);
  k.num_inputs = num_inputs;
  k.syms = std::move(syms);
  k.body = std::move(body);
  return k;
}

// The LLVM IR as the emitter writes it, before LLVM's optimisations.
std::string raw_ir(const std::vector<Kernel>& ks) {
  CodegenOptions raw;
  raw.opt_level = 0;
  return emit_llvm_ir(ks, raw);
}

// An AVX-512 target for emit_asm (the asm does not run, so any x86 host can
// check it).
CodegenOptions avx512_options() {
  CodegenOptions o;
  o.cpu = "skylake-avx512";
  o.features = "+avx512f,+avx512dq,+avx512bw,+avx512vl,+avx2,+fma";
  return o;
}

int32_t run_kernel(const KernelLibrary& lib, const std::string& name, std::vector<void*> bufs, std::vector<int64_t> syms = {},
             int64_t begin = 0, int64_t end = std::numeric_limits<int64_t>::max()) {
  return lib.lookup(name)(bufs.data(), syms.data(), begin, end);
}

// for i in [0, n): body(i), as a vectorized loop of width w plus either a
// scalar tail loop or (masked) a guard If inside the vector loop.
Stmt vector_loop(Expr n, int64_t w, const std::function<Stmt(Expr)>& body, bool masked) {
  Expr io = var("io"), ii = var("ii");
  if (masked) {
    Stmt guarded = let("i", io * w + ii, if_then(binary(BinaryOp::Lt, var("i"), n), body(var("i"))));
    return for_loop("io", 0, floordiv(n + (w - 1), w), ForKind::Serial, for_loop("ii", 0, w, ForKind::Vectorized, guarded));
  }
  Expr full = floordiv(n, w);
  return seq({for_loop("io", 0, full, ForKind::Serial, for_loop("ii", 0, w, ForKind::Vectorized, body(io * w + ii))),
              for_loop("t", full * w, n - full * w, ForKind::Serial, body(var("t")))});
}

Stmt scalar_loop(Expr n, const std::function<Stmt(Expr)>& body) {
  return for_loop("i", 0, n, ForKind::Serial, body(var("i")));
}

// ---- elementwise, broadcast, reduction, parallel ------------------------------------------

TEST(CodegenCpu, ElementwiseVectorizedWithTail) {
  Expr n = var("n");
  auto a = buffer("a", DType::F32, {n}), b = buffer("b", DType::F32, {n}), out = buffer("out", DType::F32, {n});
  auto body = [&](Expr i) { return store(out, {i}, load(a, {i}) * load(b, {i}) + float_imm(DType::F32, 1.0)); };
  std::vector<Kernel> ks = {kernel("tail", {a, b, out}, 2, {"n"}, vector_loop(n, 8, body, false)),
                            kernel("masked", {a, b, out}, 2, {"n"}, vector_loop(n, 16, body, true))};
  auto lib = compile_kernels(ks, {});
  for (int64_t size : {0, 1, 7, 8, 37, 100}) {
    std::vector<float> x(size), y(size);
    for (int64_t i = 0; i < size; ++i) x[i] = 0.5f * i, y[i] = 3.0f - i;
    for (const char* name : {"tail", "masked"}) {
      std::vector<float> r(size + 1, -7.0f);  // one guard element past the end
      ASSERT_EQ(run_kernel(*lib, name, {x.data(), y.data(), r.data()}, {size}), 0);
      for (int64_t i = 0; i < size; ++i) EXPECT_EQ(r[i], x[i] * y[i] + 1.0f) << name << " " << i;
      EXPECT_EQ(r[size], -7.0f) << name << ": wrote past the end";
    }
  }
}

TEST(CodegenCpu, BroadcastRowAndColumn) {
  Expr m = var("m"), n = var("n");
  auto x = buffer("x", DType::F32, {m, n}), bias = buffer("bias", DType::F32, {n});
  auto row = buffer("row", DType::F32, {m}), out = buffer("out", DType::F32, {m, n});
  Stmt inner = vector_loop(n, 8, [&](Expr j) {
    return store(out, {var("r"), j}, load(x, {var("r"), j}) + load(bias, {j}) * load(row, {var("r")}));
  }, false);
  auto lib = compile_kernels({kernel("bcast", {x, bias, row, out}, 3, {"m", "n"},
                                     for_loop("r", 0, m, ForKind::Serial, inner))}, {});
  const int64_t M = 3, N = 21;
  std::vector<float> xs(M * N), bs(N), rs(M), o(M * N);
  for (int64_t i = 0; i < M * N; ++i) xs[i] = i * 0.25f;
  for (int64_t j = 0; j < N; ++j) bs[j] = j - 4.0f;
  for (int64_t i = 0; i < M; ++i) rs[i] = i + 1.0f;
  ASSERT_EQ(run_kernel(*lib, "bcast", {xs.data(), bs.data(), rs.data(), o.data()}, {M, N}), 0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) EXPECT_EQ(o[i * N + j], xs[i * N + j] + bs[j] * rs[i]);
}

TEST(CodegenCpu, ReductionsVectorizedOverRowsAndIntoALocal) {
  Expr m = var("m"), n = var("n");
  auto x = buffer("x", DType::F64, {m, n}), rows = buffer("rows", DType::F64, {m}), total = buffer("total", DType::F64, {});
  // rows[i] = sum_j x[i, j], vectorized over i: x[i, j] is a gather (stride n).
  Stmt row_sums = vector_loop(m, 4, [&](Expr i) {
    return seq({store(rows, {i}, float_imm(DType::F64, 0)),
                for_loop("j", 0, n, ForKind::Serial, store(rows, {i}, load(rows, {i}) + load(x, {i, var("j")})))});
  }, true);
  auto acc = buffer("acc", DType::F64, {1}, BufferScope::Local);
  Stmt grand = allocate(acc, seq({store(acc, {0}, float_imm(DType::F64, 0)),
                                  for_loop("k", 0, m, ForKind::Serial,
                                           store(acc, {0}, load(acc, {0}) + load(rows, {var("k")}))),
                                  store(total, {}, load(acc, {0}))}));
  auto lib = compile_kernels({kernel("sums", {x, rows, total}, 1, {"m", "n"}, seq({row_sums, grand}))}, {});
  const int64_t M = 10, N = 7;
  std::vector<double> xs(M * N), r(M), t(1);
  for (int64_t i = 0; i < M * N; ++i) xs[i] = std::sin(static_cast<double>(i));
  ASSERT_EQ(run_kernel(*lib, "sums", {xs.data(), r.data(), t.data()}, {M, N}), 0);
  double want_total = 0;
  for (int64_t i = 0; i < M; ++i) {
    double s = 0;
    for (int64_t j = 0; j < N; ++j) s += xs[i * N + j];
    EXPECT_EQ(r[i], s);
    want_total += s;
  }
  EXPECT_EQ(t[0], want_total);
}

TEST(CodegenCpu, ParallelLoopSplitIntoChunksMatchesOneCall) {
  Expr n = var("n");
  auto x = buffer("x", DType::I32, {n, 16}), out = buffer("out", DType::I32, {n, 16});
  Stmt body = for_loop("p", 0, n, ForKind::Parallel,
                       for_loop("v", 0, 16, ForKind::Vectorized,
                                store(out, {var("p"), var("v")},
                                      load(x, {var("p"), var("v")}) * int_imm(DType::I32, 3) +
                                          cast(DType::I32, var("p")))));
  auto lib = compile_kernels({kernel("par", {x, out}, 1, {"n"}, body)}, {});
  const int64_t N = 11;
  std::vector<int32_t> xs(N * 16), whole(N * 16, -1), split(N * 16, -1);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<int32_t>(i * 7 % 13);
  ASSERT_EQ(run_kernel(*lib, "par", {xs.data(), whole.data()}, {N}, 0, N), 0);
  for (auto [b, e] : std::vector<std::pair<int64_t, int64_t>>{{-5, 2}, {2, 3}, {3, 3}, {3, 8}, {8, 1000}})
    ASSERT_EQ(run_kernel(*lib, "par", {xs.data(), split.data()}, {N}, b, e), 0);
  EXPECT_EQ(whole, split);
  for (int64_t p = 0; p < N; ++p) EXPECT_EQ(whole[p * 16 + 5], xs[p * 16 + 5] * 3 + p);
  // A chunk writes only its rows.
  std::vector<int32_t> part(N * 16, -1);
  ASSERT_EQ(run_kernel(*lib, "par", {xs.data(), part.data()}, {N}, 4, 5), 0);
  EXPECT_EQ(part[3 * 16], -1);
  EXPECT_EQ(part[4 * 16], whole[4 * 16]);
  EXPECT_EQ(part[5 * 16], -1);
}

TEST(CodegenCpu, AssertsReturnOnePlusTheirPreorderIndex) {
  Expr n = var("n");
  auto x = buffer("x", DType::F32, {8});
  Stmt body = seq({assert_that(binary(BinaryOp::Gt, n, 0), "n > 0"),
                   for_loop("u", 0, 2, ForKind::Unrolled, assert_that(binary(BinaryOp::Lt, n + var("u"), 100), "n < 100")),
                   for_loop("v", 0, 8, ForKind::Vectorized,
                            if_then(binary(BinaryOp::Lt, var("v"), n),
                                    assert_that(binary(BinaryOp::Ge, load(x, {var("v")}), float_imm(DType::F32, 0)),
                                                "x >= 0")))});
  Kernel k = kernel("checks", {x}, 1, {"n"}, body);
  ASSERT_EQ(k.assert_messages().size(), 3u);
  auto lib = compile_kernels({k}, {});
  std::vector<float> xs(8, 1.0f);
  EXPECT_EQ(run_kernel(*lib, "checks", {xs.data()}, {5}), 0);
  EXPECT_EQ(run_kernel(*lib, "checks", {xs.data()}, {0}), 1);
  EXPECT_EQ(run_kernel(*lib, "checks", {xs.data()}, {99}), 2);
  xs[6] = -1.0f;  // lane 6 fails only when it is active
  EXPECT_EQ(run_kernel(*lib, "checks", {xs.data()}, {6}), 0);
  EXPECT_EQ(run_kernel(*lib, "checks", {xs.data()}, {7}), 3);
}

// ---- every binary op on several types -----------------------------------------------------

const BinaryOp kAllOps[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Mod,
                            BinaryOp::FloorDiv, BinaryOp::FloorMod, BinaryOp::Min, BinaryOp::Max, BinaryOp::And,
                            BinaryOp::Or, BinaryOp::Xor, BinaryOp::Shl, BinaryOp::Shr, BinaryOp::Eq, BinaryOp::Ne,
                            BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge};

bool is_cmp(BinaryOp op) {
  return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le || op == BinaryOp::Gt ||
         op == BinaryOp::Ge;
}

bool int_only(BinaryOp op) {
  return op == BinaryOp::FloorDiv || op == BinaryOp::FloorMod || op == BinaryOp::And || op == BinaryOp::Or ||
         op == BinaryOp::Xor || op == BinaryOp::Shl || op == BinaryOp::Shr;
}

template <class T>
T int_ref(BinaryOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  constexpr bool s = std::is_signed_v<T>;
  constexpr int bits = sizeof(T) * 8;
  auto trunc_div = [&] { return b == 0 ? T(0) : (s && b == T(-1)) ? T(U(0) - U(a)) : T(a / b); };
  auto trunc_mod = [&] { return (b == 0 || (s && b == T(-1))) ? T(0) : T(a % b); };
  const T r = trunc_mod();
  const bool adjust = s && r != 0 && ((r < 0) != (b < 0));
  const bool oor = static_cast<uint64_t>(static_cast<U>(b)) >= bits;
  switch (op) {
    case BinaryOp::Add: return T(U(a) + U(b));
    case BinaryOp::Sub: return T(U(a) - U(b));
    case BinaryOp::Mul: return T(U(a) * U(b));
    case BinaryOp::Div: return trunc_div();
    case BinaryOp::Mod: return r;
    case BinaryOp::FloorDiv: return adjust ? T(trunc_div() - 1) : trunc_div();
    case BinaryOp::FloorMod: return adjust ? T(r + b) : r;
    case BinaryOp::Min: return std::min(a, b);
    case BinaryOp::Max: return std::max(a, b);
    case BinaryOp::And: return T(a & b);
    case BinaryOp::Or: return T(a | b);
    case BinaryOp::Xor: return T(a ^ b);
    case BinaryOp::Shl: return oor ? T(0) : T(U(a) << b);
    case BinaryOp::Shr: return oor ? (a < 0 ? T(-1) : T(0)) : T(a >> b);
    case BinaryOp::Eq: return a == b;
    case BinaryOp::Ne: return a != b;
    case BinaryOp::Lt: return a < b;
    case BinaryOp::Le: return a <= b;
    case BinaryOp::Gt: return a > b;
    case BinaryOp::Ge: return a >= b;
  }
  return 0;
}

template <class T>
T float_ref(BinaryOp op, T a, T b) {
  const bool nan = std::isnan(a) || std::isnan(b);
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Mod: return std::fmod(a, b);
    case BinaryOp::Min:
      return nan ? std::numeric_limits<T>::quiet_NaN() : (a == b ? (std::signbit(a) ? a : b) : std::min(a, b));
    case BinaryOp::Max:
      return nan ? std::numeric_limits<T>::quiet_NaN() : (a == b ? (std::signbit(a) ? b : a) : std::max(a, b));
    case BinaryOp::Eq: return a == b;
    case BinaryOp::Ne: return a != b;
    case BinaryOp::Lt: return a < b;
    case BinaryOp::Le: return a <= b;
    case BinaryOp::Gt: return a > b;
    case BinaryOp::Ge: return a >= b;
    default: return 0;
  }
}

template <class T>
bool same(T want, T got) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(want)) return std::isnan(got);
    return std::memcmp(&want, &got, sizeof(T)) == 0;  // -0 differs from +0
  }
  return want == got;
}

template <class T>
constexpr int bits_of() { return sizeof(T) * 8; }

template <class T>
std::vector<T> edge_values() {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_floating_point_v<T>) {
    return {T(0), T(-0.0), T(1), T(-1), T(2.5), T(-7), T(3), L::infinity(), -L::infinity(), L::quiet_NaN(),
            L::max(), L::denorm_min(), T(1e-3)};
  } else {
    std::vector<T> v = {T(0), T(1), T(2), T(3), T(7), T(100), L::min(), L::max(), T(L::min() + 1), T(bits_of<T>()),
                        T(bits_of<T>() - 1)};
    if (std::is_signed_v<T>) v.insert(v.end(), {T(-1), T(-2), T(-7), T(-100)});
    return v;
  }
}

template <class T>
void check_binary_ops(DType t) {
  const std::vector<T> vals = edge_values<T>();
  std::vector<T> as, bs;
  for (T x : vals)
    for (T y : vals) as.push_back(x), bs.push_back(y);
  const int64_t n = static_cast<int64_t>(as.size());
  auto a = buffer("a", t, {n}), b = buffer("b", t, {n});
  std::vector<Kernel> ks;
  std::vector<BinaryOp> ops;
  for (BinaryOp op : kAllOps) {
    if (is_float(t) && int_only(op)) continue;
    ops.push_back(op);
    auto out = buffer("out", is_cmp(op) ? DType::Bool : t, {n});
    auto body = [&](Expr i) { return store(out, {i}, binary(op, load(a, {i}), load(b, {i}))); };
    const std::string base = "op" + std::to_string(static_cast<int>(op));
    ks.push_back(kernel(base + "_s", {a, b, out}, 2, {}, scalar_loop(n, body)));
    ks.push_back(kernel(base + "_v", {a, b, out}, 2, {}, vector_loop(n, 8, body, true)));
  }
  auto lib = compile_kernels(ks, {});
  for (BinaryOp op : ops) {
    for (const char* suffix : {"_s", "_v"}) {
      const std::string name = "op" + std::to_string(static_cast<int>(op)) + suffix;
      std::vector<T> out(n);
      std::vector<uint8_t> flags(n);
      void* dst = is_cmp(op) ? static_cast<void*>(flags.data()) : static_cast<void*>(out.data());
      ASSERT_EQ(run_kernel(*lib, name, {as.data(), bs.data(), dst}), 0);
      for (int64_t i = 0; i < n; ++i) {
        T want;
        if constexpr (std::is_floating_point_v<T>) want = float_ref(op, as[i], bs[i]);
        else want = int_ref(op, as[i], bs[i]);
        if (is_cmp(op)) {
          EXPECT_EQ(flags[i], want ? 1 : 0) << dtype_name(t) << " " << name << " " << +as[i] << " " << +bs[i];
        } else {
          EXPECT_TRUE(same(want, out[i])) << dtype_name(t) << " " << name << " " << +as[i] << " " << +bs[i]
                                          << ": want " << +want << " got " << +out[i];
        }
      }
    }
  }
}

TEST(CodegenCpu, BinaryOpsI8) { check_binary_ops<int8_t>(DType::I8); }
TEST(CodegenCpu, BinaryOpsI32) { check_binary_ops<int32_t>(DType::I32); }
TEST(CodegenCpu, BinaryOpsI64) { check_binary_ops<int64_t>(DType::I64); }
TEST(CodegenCpu, BinaryOpsU8) { check_binary_ops<uint8_t>(DType::U8); }
TEST(CodegenCpu, BinaryOpsU32) { check_binary_ops<uint32_t>(DType::U32); }
TEST(CodegenCpu, BinaryOpsU64) { check_binary_ops<uint64_t>(DType::U64); }
TEST(CodegenCpu, BinaryOpsF32) { check_binary_ops<float>(DType::F32); }
TEST(CodegenCpu, BinaryOpsF64) { check_binary_ops<double>(DType::F64); }

// ---- casts: bit-exact with Tensor::cast --------------------------------------------------

const DType kTypes[] = {DType::Bool, DType::I8,  DType::I16, DType::I32, DType::I64,  DType::U8,  DType::U16,
                        DType::U32,  DType::U64, DType::F16, DType::BF16, DType::F32, DType::F64};

Tensor cast_inputs(DType from) {
  const double doubles[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 0.49999997, 127.5, 128.0, -129.0, 255.5,
                            256.0, 65504.0, 65520.0, 65536.0, -32769.0, 1e-8, 6e-8, 1.0 / 3.0, 1.00390625,
                            1.0 + 1.0 / 512, 3e9, -3e9, 4294967296.5, 9.2e18, 9.3e18, -9.3e18, 1.8e19, 2e19,
                            1e30, 3.4e38, 1e300, -1e300, INFINITY, -INFINITY, NAN, -NAN, 5e-324};
  const int64_t ints[] = {INT64_MIN, INT64_MAX, INT64_MIN + 1, -1, 0x7FFFFFFF, -0x80000000LL, 0xFFFFFFFF,
                          (int64_t{1} << 53) + 1, (int64_t{1} << 24) + 1, 2049, -(int64_t{1} << 62) - 3};
  const int64_t n = static_cast<int64_t>(std::size(doubles) + std::size(ints));
  Tensor t(from, {n});
  int64_t k = 0;
  for (double d : doubles) t.set_f64(k++, d);
  for (int64_t v : ints) t.set_i64(k++, v);
  return t;
}

TEST(CodegenCpu, CastsMatchTensorCastBitExactly) {
  std::vector<Kernel> ks;
  for (DType from : kTypes) {
    for (DType to : kTypes) {
      const int64_t n = cast_inputs(from).numel();
      auto in = buffer("in", from, {n}), out = buffer("out", to, {n});
      auto body = [&](Expr i) { return store(out, {i}, cast(to, load(in, {i}))); };
      const std::string base = std::string(dtype_name(from)) + "_" + std::string(dtype_name(to));
      ks.push_back(kernel(base + "_s", {in, out}, 1, {}, scalar_loop(n, body)));
      ks.push_back(kernel(base + "_v", {in, out}, 1, {}, vector_loop(n, 8, body, false)));
    }
  }
  auto lib = compile_kernels(ks, {});
  for (DType from : kTypes) {
    const Tensor src = cast_inputs(from);
    for (DType to : kTypes) {
      const Tensor want = src.cast(to);
      for (const char* suffix : {"_s", "_v"}) {
        const std::string name = std::string(dtype_name(from)) + "_" + std::string(dtype_name(to)) + suffix;
        Tensor got(to, {src.numel()});
        ASSERT_EQ(run_kernel(*lib, name, {const_cast<uint8_t*>(src.raw()), got.mutable_raw()}), 0);
        const int size = dtype_storage_size(to);
        for (int64_t i = 0; i < src.numel(); ++i) {
          const bool equal = std::memcmp(want.raw() + i * size, got.raw() + i * size, size) == 0;
          EXPECT_TRUE(equal) << name << " element " << i << ": " << src.get_f64(i) << " -> want " << want.get_f64(i)
                             << " got " << got.get_f64(i);
        }
      }
    }
  }
}

TEST(CodegenCpu, NarrowFloatRoundingIsBitExactOnRandomPatterns) {
  const int64_t n = 4096;
  auto in = buffer("in", DType::F32, {n}), h = buffer("h", DType::F16, {n}), bf = buffer("bf", DType::BF16, {n});
  auto sum = buffer("sum", DType::BF16, {n});
  Stmt body = vector_loop(n, 16, [&](Expr i) {
    Expr x = load(in, {i});
    return seq({store(h, {i}, cast(DType::F16, x)), store(bf, {i}, cast(DType::BF16, x)),
                store(sum, {i}, cast(DType::BF16, x) * cast(DType::BF16, x) + bitcast(DType::BF16, int_imm(DType::U16, 0x3F81)))});
  }, false);
  auto lib = compile_kernels({kernel("narrow", {in, h, bf, sum}, 1, {}, body)}, {});
  std::mt19937 rng(7);
  std::vector<float> xs(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = rng();
    if (i % 4 == 1) bits = (bits & 0x8000FFFFu) | 0x3F800000u;  // near 1 with low bits set: rounding cases
    if (i % 4 == 2) bits &= 0x807FFFFFu;                         // denormals
    xs[i] = std::bit_cast<float>(bits);
  }
  std::vector<uint16_t> hs(n), bfs(n), sums(n);
  ASSERT_EQ(run_kernel(*lib, "narrow", {xs.data(), hs.data(), bfs.data(), sums.data()}), 0);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(hs[i], f32_to_f16_bits(xs[i])) << std::bit_cast<uint32_t>(xs[i]);
    EXPECT_EQ(bfs[i], f32_to_bf16_bits(xs[i])) << std::bit_cast<uint32_t>(xs[i]);
    const float r = bf16_bits_to_f32(f32_to_bf16_bits(xs[i]));
    const float p = bf16_bits_to_f32(f32_to_bf16_bits(r * r));
    const uint16_t want = f32_to_bf16_bits(p + bf16_bits_to_f32(0x3F81));
    if (std::isnan(bf16_bits_to_f32(want)))
      EXPECT_TRUE(std::isnan(bf16_bits_to_f32(sums[i])));
    else
      EXPECT_EQ(sums[i], want) << std::bit_cast<uint32_t>(xs[i]);
  }
}

// ---- widening: gathers, masks, locals, lets, selects, intrinsics -------------------------------

TEST(CodegenCpu, GatherScatterAndReversedLocal) {
  const int64_t w = 8;
  auto x = buffer("x", DType::F32, {32}), idx = buffer("idx", DType::I32, {w});
  auto g = buffer("g", DType::F32, {w}), s = buffer("s", DType::F32, {2 * w}), r = buffer("r", DType::F32, {w});
  auto tmp = buffer("tmp", DType::F32, {w}, BufferScope::Local);
  Expr v = var("v");
  Stmt body = allocate(tmp, seq({
      for_loop("v", 0, w, ForKind::Vectorized,
               seq({store(g, {v}, load(x, {cast(DType::I64, load(idx, {v}))}) + load(x, {v * 2})),
                    store(s, {v * 2 + 1}, load(x, {v})), store(tmp, {v}, load(x, {v}) * float_imm(DType::F32, 2))})),
      for_loop("v", 0, w, ForKind::Vectorized, store(r, {v}, load(tmp, {int64_t{w - 1} - v})))}));
  auto lib = compile_kernels({kernel("gs", {x, idx, g, s, r}, 2, {}, body)}, {});
  const std::string ir = raw_ir({kernel("gs", {x, idx, g, s, r}, 2, {}, body)});
  EXPECT_NE(ir.find("llvm.masked.gather"), std::string::npos);
  EXPECT_NE(ir.find("llvm.masked.scatter"), std::string::npos);
  std::vector<float> xs(32), gs(w), ss(2 * w, -1), rs(w);
  std::vector<int32_t> is = {31, 0, 5, 5, 17, 2, 30, 9};
  for (int i = 0; i < 32; ++i) xs[i] = i * 1.5f;
  ASSERT_EQ(run_kernel(*lib, "gs", {xs.data(), is.data(), gs.data(), ss.data(), rs.data()}), 0);
  for (int64_t i = 0; i < w; ++i) {
    EXPECT_EQ(gs[i], xs[is[i]] + xs[2 * i]);
    EXPECT_EQ(ss[2 * i], -1);
    EXPECT_EQ(ss[2 * i + 1], xs[i]);
    EXPECT_EQ(rs[i], xs[w - 1 - i] * 2);
  }
}

// Read through a reshape, a [4, 14] buffer indexed by (floordiv(t, 14),
// floormod(t, 14)) for consecutive t is contiguous: its flat index folds to
// t (loop/affine.h) and the access is one vector load and one vector store,
// not a gather and a scatter; across rows 0 and 1 included (t = 8..23).
TEST(CodegenCpu, ReshapedIndicesThatCancelAreContiguous) {
  const int64_t w = 16;
  auto x = buffer("x", DType::F32, {4, 14}), y = buffer("y", DType::F32, {4, 14});
  Expr t = var("t") + int64_t{8};
  const std::vector<Expr> at{floordiv(t, Expr(int64_t{14})), floormod(t, Expr(int64_t{14}))};
  Stmt body = for_loop("t", 0, w, ForKind::Vectorized, store(y, at, load(x, at) * float_imm(DType::F32, 3)));
  const Kernel k = kernel("reshaped", {x, y}, 1, {}, body);
  const std::string ir = raw_ir({k});
  EXPECT_EQ(ir.find("gather"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("scatter"), std::string::npos) << ir;
  auto lib = compile_kernels({k}, {});
  std::vector<float> xs(56), ys(56, -1.0f);
  for (int i = 0; i < 56; ++i) xs[i] = static_cast<float>(i) + 0.5f;
  ASSERT_EQ(run_kernel(*lib, "reshaped", {xs.data(), ys.data()}), 0);
  for (int i = 0; i < 56; ++i) EXPECT_EQ(ys[i], i >= 8 && i < 24 ? xs[i] * 3 : -1.0f) << i;
}

// Lanes 2, 3 or 4 elements apart (a stride-2 convolution's taps) are read as
// one span, masked past the last lane's element, and a shuffle, not a
// gather; the buffer here ends at a guard page, so a read beyond that
// element would fault.
TEST(CodegenCpu, StridedLoadsReadOneSpanAndStopAtTheLastLane) {
  const int64_t w = 8;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(mem) + page, page, PROT_NONE), 0);
  for (int64_t s : {2, 3, 4}) {
    const int64_t n = (w - 1) * s + 1;  // the last lane reads the buffer's last element
    auto x = buffer("x", DType::F32, {n}), y = buffer("y", DType::F32, {w});
    Expr v = var("v");
    Stmt body = for_loop("v", 0, w, ForKind::Vectorized, store(y, {v}, load(x, {v * s}) * float_imm(DType::F32, 2)));
    const Kernel k = kernel("strided", {x, y}, 1, {}, body);
    const std::string ir = raw_ir({k});
    EXPECT_EQ(ir.find("gather"), std::string::npos) << s;
    EXPECT_NE(ir.find("llvm.masked.load"), std::string::npos) << s;
    EXPECT_NE(ir.find("shufflevector"), std::string::npos) << s;
    auto lib = compile_kernels({k}, {});
    float* xs = reinterpret_cast<float*>(static_cast<char*>(mem) + page) - n;
    for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i) * 0.5f + 1.0f;
    std::vector<float> ys(w, -1.0f);
    ASSERT_EQ(run_kernel(*lib, "strided", {xs, ys.data()}), 0);
    for (int64_t i = 0; i < w; ++i) EXPECT_EQ(ys[i], xs[i * s] * 2) << "stride " << s << " lane " << i;
  }
  munmap(mem, 2 * page);
}

// A select whose condition varies across the lanes loads its arms only in
// the lanes that take them (a depthwise convolution's border taps, read
// unclamped): a tap one element before the buffer and one s past its end,
// contiguous (s = 1) and stride 2, with the pages either side of the
// buffer unmapped, are masked loads (no gather) and do not fault.
TEST(CodegenCpu, LaneVaryingSelectLoadsOnlyTheLanesItTakes) {
  const int64_t w = 16;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const int64_t n = static_cast<int64_t>(page / sizeof(float));
  char* mem = static_cast<char*>(mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(static_cast<void*>(mem), MAP_FAILED);
  ASSERT_EQ(mprotect(mem, page, PROT_NONE), 0);
  ASSERT_EQ(mprotect(mem + 2 * page, page, PROT_NONE), 0);
  float* xs = reinterpret_cast<float*>(mem + page);
  for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i % 97) * 0.5f + 1.0f;
  for (int64_t s : {1, 2}) {
    auto x = buffer("x", DType::F32, {n}), y = buffer("y", DType::F32, {w});
    const Expr v = var("v");
    const Expr zero = float_imm(DType::F32, 0);
    const Expr head = select(binary(BinaryOp::Ge, v, Expr(int64_t{1})), load(x, {v * s - 1}), zero);
    const Expr tail = select(binary(BinaryOp::Lt, v, Expr(w - 1)), load(x, {Expr(n - 1 - (w - 2) * s) + v * s}), zero);
    const Kernel k = kernel("edges", {x, y}, 1, {}, for_loop("v", 0, w, ForKind::Vectorized, store(y, {v}, head + tail)));
    const std::string ir = raw_ir({k});
    EXPECT_EQ(ir.find("gather"), std::string::npos) << ir;
    EXPECT_NE(ir.find("llvm.masked.load"), std::string::npos) << ir;
    auto lib = compile_kernels({k}, {});
    std::vector<float> ys(w, -1.0f);
    ASSERT_EQ(run_kernel(*lib, "edges", {xs, ys.data()}), 0);
    for (int64_t i = 0; i < w; ++i) {
      const float want = (i >= 1 ? xs[i * s - 1] : 0.0f) + (i < w - 1 ? xs[n - 1 - (w - 2) * s + i * s] : 0.0f);
      EXPECT_EQ(ys[i], want) << "stride " << s << " lane " << i;
    }
  }
  munmap(mem, 3 * page);
}

// A padded convolution's tap (the implicit GEMM's B packing): clamped,
// divided and compared lane-varying indices are i32 lanes, and the gather
// is the unbounded batch row (a scalar) plus a 32-bit offset, which x86
// gathers 16 lanes at a time (vgatherdps); the values match a direct
// computation. An offset that int32 cannot hold keeps 64-bit lanes.
TEST(CodegenCpu, PaddedTapIndicesAre32BitLanes) {
  const int64_t w = 16, width = 20;
  auto in = buffer("in", DType::F32, {var("n") * width}), out = buffer("out", DType::F32, {var("n"), 3, w});
  const Expr x = var("x"), t = var("t"), b = var("b");
  const Expr col = floordiv(x * 3 + t, 2) - 1;  // lanes 1.5 columns apart, one tap back
  const Expr inside = binary(BinaryOp::And, binary(BinaryOp::Ge, col, Expr(int64_t{0})),
                             binary(BinaryOp::Lt, col, Expr(width)));
  const Expr tap = load(in, {b * width + max(min(col, Expr(width - 1)), Expr(int64_t{0}))});
  const Stmt body = for_loop(
      "b", 0, var("n"), ForKind::Serial,
      for_loop("t", 0, 3, ForKind::Serial,
               for_loop("x", 0, w, ForKind::Vectorized,
                        store(out, {b, t, x}, select(inside, tap, float_imm(DType::F32, 0))))));
  const Kernel k = kernel("tap", {in, out}, 1, {"n"}, body);
  const std::string ir = raw_ir({k});
  EXPECT_NE(ir.find("udiv <16 x i32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("icmp slt <16 x i32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("freeze <16 x i32>"), std::string::npos) << ir;
  const std::string text = emit_asm({k}, avx512_options());
  EXPECT_NE(text.find("vgatherdps"), std::string::npos) << text;
  EXPECT_EQ(text.find("vgatherqps"), std::string::npos) << text;
  const int64_t n = 3;
  std::vector<float> xs(n * width), ys(n * 3 * w, -1.0f);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i) * 0.25f + 1.0f;
  auto lib = compile_kernels({k}, {});
  ASSERT_EQ(run_kernel(*lib, "tap", {xs.data(), ys.data()}, {n}), 0);
  for (int64_t bb = 0; bb < n; ++bb)
    for (int64_t tt = 0; tt < 3; ++tt)
      for (int64_t xx = 0; xx < w; ++xx) {
        const int64_t c = (xx * 3 + tt) / 2 - 1;
        const float want = c >= 0 && c < width ? xs[bb * width + c] : 0.0f;
        EXPECT_EQ(ys[(bb * 3 + tt) * w + xx], want) << bb << " " << tt << " " << xx;
      }
  // Lanes 2^31 elements apart: not an int32 offset.
  auto big = buffer("big", DType::F32, {Expr(int64_t{1} << 36)}), y = buffer("y", DType::F32, {w});
  const Stmt far = for_loop("x", 0, w, ForKind::Vectorized,
                            store(y, {x}, load(big, {floordiv(x * (int64_t{1} << 32), 2)})));
  const std::string far_ir = raw_ir({kernel("far", {big, y}, 1, {}, far)});
  EXPECT_EQ(far_ir.find("freeze <16 x i32>"), std::string::npos) << far_ir;
  EXPECT_NE(far_ir.find("llvm.masked.gather"), std::string::npos) << far_ir;
}

TEST(CodegenCpu, LaneVaryingIfElseSelectLetAndIntrinsics) {
  const int64_t n = 16;
  auto x = buffer("x", DType::F32, {n}), out = buffer("out", DType::F32, {n}), flags = buffer("f", DType::Bool, {n});
  Expr v = var("v");
  Expr xv = load(x, {v});
  Stmt body = for_loop("v", 0, n, ForKind::Vectorized, seq({
      let("y", call("sqrt", DType::F32, {call("fabs", DType::F32, {xv})}),
          if_then(binary(BinaryOp::Lt, xv, float_imm(DType::F32, 0)),
                  store(out, {v}, -var("y", DType::F32)),
                  store(out, {v}, call("fma", DType::F32, {var("y", DType::F32), float_imm(DType::F32, 2), call("floor", DType::F32, {xv})})))),
      store(flags, {v}, select(call("isnan", DType::Bool, {xv}), bool_imm(true), call("isinf", DType::Bool, {xv})))}));
  auto lib = compile_kernels({kernel("lanes", {x, out, flags}, 1, {}, body)}, {});
  std::vector<float> xs = {4, -9, 2.25f, -0.25f, NAN, INFINITY, -INFINITY, 0, -0.0f, 1e-30f, 7, -7, 100, -100, 0.5f, 3};
  std::vector<float> o(n);
  std::vector<uint8_t> f(n);
  ASSERT_EQ(run_kernel(*lib, "lanes", {xs.data(), o.data(), f.data()}), 0);
  for (int64_t i = 0; i < n; ++i) {
    const float y = std::sqrt(std::fabs(xs[i]));
    const float want = xs[i] < 0 ? -y : std::fma(y, 2.0f, std::floor(xs[i]));
    EXPECT_TRUE(same(want, o[i])) << i;
    EXPECT_EQ(f[i], std::isnan(xs[i]) || std::isinf(xs[i]) ? 1 : 0) << i;
  }
}

// ---- rejected input ---------------------------------------------------------------------------

TEST(CodegenCpu, RejectsWhatItCannotCompile) {
  auto x = buffer("x", DType::F32, {16}), acc = buffer("acc", DType::F32, {1});
  Expr v = var("v");
  auto expect_error = [](Stmt body, std::vector<BufferRef> params, const std::string& needle) {
    try {
      compile_kernels({kernel("bad", std::move(params), 1, {}, std::move(body))}, {});
      ADD_FAILURE() << "expected an error about " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(store(x, {0}, call("exp", DType::F32, {load(x, {0})})), {x}, "math expansion");
  expect_error(for_loop("v", 0, 16, ForKind::Vectorized, store(acc, {0}, load(acc, {0}) + load(x, {v}))), {x, acc},
               "same element from every lane");
  expect_error(for_loop("v", 0, 4, ForKind::Vectorized,
                        for_loop("w", 0, 4, ForKind::Vectorized, store(x, {v * 4 + var("w")}, float_imm(DType::F32, 0)))),
               {x}, "nested in vectorized loop");
  expect_error(for_loop("b", 0, 16, ForKind::GpuBlockX, store(x, {var("b")}, float_imm(DType::F32, 0))), {x},
               "gpu.block.x");
  expect_error(store(x, {var("nope")}, float_imm(DType::F32, 0)), {x}, "nope");
}

TEST(CodegenCpu, JitRefusesUnknownExternalSymbols) {
  const std::string ir =
      "declare void @tessel_not_a_runtime_symbol()\n"
      "define i32 @k(ptr %b, ptr %s, i64 %lo, i64 %hi) {\n"
      "  call void @tessel_not_a_runtime_symbol()\n"
      "  ret i32 0\n"
      "}\n";
  try {
    compile_llvm_ir_text(ir, {});
    ADD_FAILURE() << "the JIT linked an unknown symbol";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tessel_not_a_runtime_symbol"), std::string::npos) << e.what();
  }
  // printf is in the process but not registered: also refused.
  EXPECT_THROW(compile_llvm_ir_text("declare i32 @printf(ptr, ...)\n"
                                    "define i32 @k(ptr %b, ptr %s, i64 %lo, i64 %hi) {\n"
                                    "  %r = call i32 (ptr, ...) @printf(ptr %b)\n  ret i32 %r\n}\n", {}),
               Error);
}

// ---- assembly and cache --------------------------------------------------------------------------

Kernel fma_kernel() {
  Expr n = var("n");
  auto a = buffer("a", DType::F32, {n}), b = buffer("b", DType::F32, {n}), c = buffer("c", DType::F32, {n});
  return kernel("fma16", {a, b, c}, 2, {"n"}, vector_loop(n, 16, [&](Expr i) {
    return store(c, {i}, call("fma", DType::F32, {load(a, {i}), load(b, {i}), load(c, {i})}));
  }, false));
}

// A Pad kernel of ResNet-18 (1x64x56x56 -> 58x58) as lowered, borders split:
// its first vector of each row selects zero for the left edge lane.
const char* kPadBorder =
    "kernel k0_pad(in %in0: f32[1, 64, 56, 56], out %out1: f32[1, 64, 58, 58]) {\n"
    "  parallel for p0 in [0, 3712) {\n"
    "    let i1 = floordiv(p0, 58)\n"
    "    let i2 = floormod(p0, 58)\n"
    "    for vo1_border in [0, 1) {\n"
    "      vectorized for vi2_border in [0, 16) {\n"
    "        out1[0, i1, i2, vo1_border * 16 + vi2_border] = select(i2 + -1 >= 0 & i2 + -1 < 56 & vo1_border * 16 + vi2_border + -1 >= 0, in0[0, i1, max(min(i2 + -1, 55), 0), max(vo1_border * 16 + vi2_border + -1, 0)], 0.0f32)\n"
    "      }\n"
    "    }\n"
    "    for vo1 in [1, 1 + 2) {\n"
    "      vectorized for vi2 in [0, 16) {\n"
    "        out1[0, i1, i2, vo1 * 16 + vi2] = select(i2 + -1 >= 0 & i2 + -1 < 56, in0[0, i1, max(min(i2 + -1, 55), 0), vo1 * 16 + vi2 + -1], 0.0f32)\n"
    "      }\n"
    "    }\n"
    "    for i3 in [48, 48 + 9) {\n"
    "      out1[0, i1, i2, i3] = select(i2 + -1 >= 0 & i2 + -1 < 56, in0[0, i1, max(min(i2 + -1, 55), 0), i3 + -1], 0.0f32)\n"
    "    }\n"
    "    for i3_border in [57, 57 + 1) {\n"
    "      out1[0, i1, i2, i3_border] = select(i2 + -1 >= 0 & i2 + -1 < 56 & i3_border + -1 < 56, in0[0, i1, max(min(i2 + -1, 55), 0), min(i3_border + -1, 55)], 0.0f32)\n"
    "    }\n"
    "  }\n"
    "}\n";

// LLVM builds that lane mask with SSE4a's INSERTQ when the features allow
// it, which made a Pad kernel 11x slower on a Zen 3 (docs/performance.md):
// the host features keep SSE4a off (codegen/cpu/target.cpp).
TEST(CodegenCpu, HostFeaturesLeaveSse4aOff) {
  EXPECT_EQ(host_cpu_features().find("+sse4a"), std::string::npos) << host_cpu_features();
  // Zen 3's own features (AVX2, no AVX-512: on an AVX-512 host the masks
  // take another form and no INSERTQ appears either way), SSE4a off as the
  // host's are, then on.
  const loop::Kernel k = loop::testing::verified_kernel(kPadBorder);
  CodegenOptions zen3;
  zen3.cpu = "znver3";
  zen3.features = "-sse4a";
  const std::string without = emit_asm({k}, zen3);
  EXPECT_EQ(without.find("insertq"), std::string::npos) << without;
  zen3.features = "+sse4a";
  EXPECT_NE(emit_asm({k}, zen3).find("insertq"), std::string::npos) << "the kernel no longer shows the pattern";
}

TEST(CodegenCpu, FmaLoopBecomesZmmVfmaddOnAvx512) {
  const std::string text = emit_asm({fma_kernel()}, avx512_options());
  EXPECT_NE(text.find("vfmadd"), std::string::npos);
  EXPECT_NE(text.find("zmm"), std::string::npos) << text;
  const std::string host = emit_asm({fma_kernel()}, {});
  if (host_cpu_features().find("+fma") != std::string::npos) EXPECT_NE(host.find("vfmadd"), std::string::npos);
  const std::string ir = emit_llvm_ir({fma_kernel()}, {});
  EXPECT_NE(ir.find("llvm.fma.v16f32"), std::string::npos);
  // Contiguous accesses are plain vector loads/stores, not gathers.
  EXPECT_NE(ir.find("load <16 x float>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("store <16 x float>"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("gather"), std::string::npos) << ir;
}

TEST(CodegenCpu, DiskCacheHitsAndRecoversFromCorruptFiles) {
  const auto dir = std::filesystem::temp_directory_path() / ("tessel_cg_cache_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  CodegenOptions o;
  o.cache_dir = dir.string();
  o.cache_key_text = "fma16 v1";
  auto run = [](const KernelLibrary& lib) {
    std::vector<float> a(40), b(40), c(40);
    for (int i = 0; i < 40; ++i) a[i] = i * 0.5f, b[i] = 2.0f - i, c[i] = 1.0f;
    EXPECT_EQ(run_kernel(lib, "fma16", {a.data(), b.data(), c.data()}, {40}), 0);
    return c;
  };
  auto first = compile_kernels({fma_kernel()}, o);
  EXPECT_FALSE(first->loaded_from_cache());
  auto second = compile_kernels({fma_kernel()}, o);
  EXPECT_TRUE(second->loaded_from_cache());
  EXPECT_EQ(first->object_file_bytes(), second->object_file_bytes());
  EXPECT_EQ(run(*first), run(*second));

  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir / "cpu")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);  // no temporary left behind
  const auto size = std::filesystem::file_size(files[0]);
  for (int damage = 0; damage < 3; ++damage) {
    if (damage == 0) std::filesystem::resize_file(files[0], size / 2);  // truncated
    if (damage == 1) {                                                   // one flipped payload byte
      std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(size - 100));
      f.put('\x5A');
    }
    if (damage == 2) std::ofstream(files[0], std::ios::trunc) << "garbage";
    auto again = compile_kernels({fma_kernel()}, o);
    EXPECT_FALSE(again->loaded_from_cache()) << damage;
    EXPECT_EQ(run(*again), run(*first));
    EXPECT_TRUE(compile_kernels({fma_kernel()}, o)->loaded_from_cache()) << "rewritten after damage " << damage;
  }
  CodegenOptions other = o;
  other.cache_key_text = "fma16 v2";
  EXPECT_FALSE(compile_kernels({fma_kernel()}, other)->loaded_from_cache());
  std::filesystem::remove_all(dir);
}

TEST(CodegenCpu, LoadObjectAndConcurrentCompiles) {
  auto lib = compile_kernels({fma_kernel()}, {});
  auto copy = load_object(lib->object_file_bytes());
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto mine = t % 2 == 0 ? compile_kernels({fma_kernel()}, {}) : nullptr;
      const KernelLibrary& use = mine ? *mine : *copy;
      std::vector<float> a(33, 2.0f), b(33, 3.0f), c(33, 1.0f);
      ok[t] = run_kernel(use, "fma16", {a.data(), b.data(), c.data()}, {33}) == 0 && c[32] == 7.0f;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
  EXPECT_THROW(lib->lookup("no_such_kernel"), Error);
}

}  // namespace
}  // namespace tessel::cpu

#endif  // TESSEL_HAVE_CODEGEN_CPU
