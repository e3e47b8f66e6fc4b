// Kernels that the CUDA backend tests share: hand-written loop IR covering
// every construct the code generators handle, and small models whose fused
// groups are lowered for the GPU. tests/unit/codegen_cuda_test.cpp emits and
// compiles them with NVRTC (no GPU needed); tests/gpu/ runs them on a GPU
// against the loop IR evaluator.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "tessel/ir/builder.h"
#include "tessel/ir/graph.h"
#include "tessel/ir/tensor.h"
#include "tessel/loop/intrinsics.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/ir.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/lower_gpu.h"
#include "tessel/ops/registry.h"
#include "tessel/passes/fusion.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/schedule/gpu_schedule.h"
#include "tessel/support/error.h"

namespace tessel::cuda_testing {

struct TextKernel {
  std::string text;
  std::map<std::string, int64_t> syms;  // values to run it with
  bool gpu_native = false;  // written with GPU axes already (no schedule_for_gpu)
  bool special_values = true;  // inputs include NaN, infinities, zeros, subnormals
};

// CPU-style kernels (one parallel loop) unless gpu_native.
inline std::vector<TextKernel> hand_written_kernels() {
  return {
      // Floats: select, min/max, fma and the other primitive intrinsics, fmod, NaN tests.
      {R"(kernel floats(in %a: f32[n, 37], in %b: f32[37], in %c: f64[n, 37], out %o: f32[n, 37], out %d: f64[n, 37]) syms(n) {
  parallel for p in [0, n) {
    for j in [0, 37) {
      let x = a[p, j]
      let y = b[j]
      let z = c[p, j]
      o[p, j] = select(x > y, fma(x, y, -(1.5f32)), min(x, y) * max(x, -0.0f32)) + sqrt(fabs(x)) - floor(y) + ceil(x) / trunc(y + 0.5f32) + rint(x * 3.0f32) + copysign(1.0f32, y) + select(isnan:bool(x / y) | isinf:bool(y / x), 7.0f32, x % y)
      d[p, j] = select(z >= 0.0f64, sqrt(z), z * 0.1f64) + fma(z, z, 1e-300f64) + min(z, 2.0f64) - max(z, -0.0f64) + z % 0.75f64 + rint(z) + floor(z) + ceil(z) + trunc(z) + copysign(fabs(z), -(1.0f64)) + select(isinf:bool(z * 1e308f64), 1.0f64, 0.0f64)
    }
  }
}
)", {{"n", 100}}},
      // Integers of every width: wrapping arithmetic, truncating and floor division,
      // shifts, bitwise operators, min/max, conversions between widths.
      {R"(kernel ints(in %a: i32[n], in %b: i32[n], in %c: i8[n], in %d: i8[n], in %e: u64[n], in %f: u64[n], in %g: i64[n], in %h: i64[n], in %u: u16[n], in %v: u16[n], out %o32: i32[n], out %o8: i8[n], out %o64: u64[n], out %oi64: i64[n], out %o16: u16[n]) syms(n) {
  parallel for p in [0, floordiv(n + 63, 64)) {
    for i in [p * 64, p * 64 + min(64, n - p * 64)) {
      let b1 = select(b[i] == 0i32, 1i32, b[i])
      let d1 = select(d[i] == 0i8, 1i8, d[i])
      let f1 = select(f[i] == 0u64, 1u64, f[i])
      let h1 = select(h[i] == 0, 1, h[i])
      let v1 = select(v[i] == 0u16, 1u16, v[i])
      o32[i] = a[i] / b1 + a[i] % b1 * 3i32 - floordiv(a[i], b1) + floormod(a[i], b1) ^ a[i] << (b[i] & 31i32) | a[i] >> (b[i] & 31i32) & ~a[i] + -a[i] + min(a[i], b[i]) - max(a[i], b[i]) * a[i]
      o8[i] = c[i] * d[i] + c[i] / d1 - floordiv(c[i], d1) + floormod(c[i], d1) + (c[i] >> (d[i] & 7i8)) + (c[i] << (d[i] & 7i8)) + cast<i8>(a[i]) - min(c[i], d[i]) + -c[i]
      o64[i] = e[i] * f[i] + e[i] / f1 + e[i] % f1 - (e[i] >> (f[i] & 63u64)) + (e[i] << (f[i] & 63u64)) + cast<u64>(g[i]) + select(e[i] < f[i], 1u64, 0u64) + max(e[i], f[i]) + floordiv(e[i], f1) + ~e[i]
      oi64[i] = g[i] * h[i] + floordiv(g[i], h1) + floormod(g[i], h1) + g[i] % h1 + g[i] / h1 + cast<i64>(e[i]) + cast<i64>(c[i]) + cast<i64>(u[i]) + (g[i] >> (h[i] & 63)) - min(g[i], h[i]) + (g[i] ^ h[i] | g[i] & 255)
      o16[i] = u[i] * v[i] + u[i] / v1 - (u[i] << (v[i] & 15u16)) + cast<u16>(c[i]) + (u[i] >> (v[i] & 15u16)) + floormod(u[i], v1) - max(u[i], v[i])
    }
  }
}
)", {{"n", 1000}}},
      // Casts and bitcasts between every kind of type; f16/bf16 arithmetic
      // (rounded after every operation), bool logic.
      {R"(kernel casts(in %f: f32[n], in %d: f64[n], in %h: f16[n], in %bf: bf16[n], in %i: i64[n], out %oi8: i8[n], out %ou64: u64[n], out %oi32: i32[n], out %of16: f16[n], out %obf: bf16[n], out %of32: f32[n], out %of64: f64[n], out %ob: bool[n], out %ou8: u8[n]) syms(n) {
  parallel for p in [0, n) {
    oi8[p] = cast<i8>(f[p] * 1000.0f32) + cast<i8>(d[p] * 1e30f64) + cast<i8>(h[p])
    ou64[p] = cast<u64>(d[p] * 1e20f64) + cast<u64>(f[p] * -3.0f32) + cast<u64>(bf[p] * 1e19bf16)
    oi32[p] = cast<i32>(d[p] * 1e12f64) + bitcast<i32>(f[p]) + cast<i32>(bitcast<i16>(h[p])) + cast<i32>(bitcast<u16>(bf[p])) + cast<i32>(i[p])
    of16[p] = cast<f16>(d[p]) + h[p] * cast<f16>(f[p]) - cast<f16>(i[p]) + sqrt(fabs(h[p])) + fma(h[p], h[p], h[p]) / cast<f16>(bf[p]) + min(h[p], -(h[p]))
    obf[p] = cast<bf16>(f[p]) * bf[p] + cast<bf16>(h[p]) / cast<bf16>(d[p]) - cast<bf16>(i[p]) + sqrt(fabs(bf[p])) + fma(bf[p], bf[p], -(bf[p])) + max(bf[p], 0.5bf16)
    of32[p] = cast<f32>(d[p]) + cast<f32>(i[p]) + cast<f32>(h[p]) * cast<f32>(bf[p]) + bitcast<f32>(cast<i32>(i[p])) + cast<f32>(cast<u64>(i[p]))
    of64[p] = cast<f64>(f[p]) * d[p] + cast<f64>(i[p]) + cast<f64>(cast<u64>(i[p])) + bitcast<f64>(i[p] & 4611686018427387903) + cast<f64>(h[p]) + cast<f64>(bf[p])
    ob[p] = cast<bool>(f[p]) & !cast<bool>(i[p]) | cast<bool>(h[p]) ^ d[p] != d[p] | cast<bool>(cast<u8>(i[p]))
    ou8[p] = cast<u8>(cast<bool>(f[p])) + cast<u8>(i[p]) + cast<u8>(h[p]) + cast<u8>(bitcast<i8>(cast<u8>(i[p] >> 8)))
  }
}
)", {{"n", 777}}},
      // Row reductions in local accumulators, lets, asserts (the second one
      // fails for an element >= 1000).
      {R"(kernel rows(in %x: f32[n, m], out %o: f32[n, m], out %s: f64[n]) syms(n, m) {
  assert m >= 1, "m must be positive"
  parallel for p in [0, n) {
    allocate %mx: f32[1] local
    allocate %sum: f64[1] local
    mx[0] = -inff32
    for k in [0, m) {
      mx[0] = max(mx[0], x[p, k])
    }
    for k2 in [0, m) {
      sum[0] = sum[0] + cast<f64>(x[p, k2] - mx[0])
    }
    s[p] = sum[0]
    for j in [0, m) {
      assert x[p, j] < 1000.0f32, "element too large"
      o[p, j] = (x[p, j] - mx[0]) / cast<f32>(sum[0])
    }
  }
}
)", {{"n", 13}, {"m", 50}}, false, false},
      // A reduction over everything: no parallel loop, one thread.
      {R"(kernel total(in %x: f32[n], out %o: f64[]) syms(n) {
  allocate %acc: f64[1] local
  acc[0] = 0.0f64
  for i in [0, n) {
    acc[0] = acc[0] + cast<f64>(x[i])
  }
  o[] = acc[0]
}
)", {{"n", 1234}}},
      // Written for the GPU: two block axes, a 2-D block, shared memory that
      // each thread uses alone (no barrier in the IR yet), vectorized and
      // unrolled loops run as plain loops.
      {R"(kernel native(in %x: f32[n, 64], out %o: f32[n, 64]) syms(n) {
  gpu.block.x for bx in [0, 2) {
    gpu.block.y for by in [0, floordiv(n + 1, 2)) {
      gpu.thread.x for tx in [0, 16) {
        gpu.thread.y for ty in [0, 2) {
          allocate %sh: f32[2, 16] shared
          let r = by * 2 + ty
          if r < n {
            vectorized for v in [0, 2) {
              sh[ty, tx] = x[r, bx * 32 + tx * 2 + v] * 2.0f32
              o[r, bx * 32 + tx * 2 + v] = sh[ty, tx] + 1.0f32
            }
            unrolled for u in [0, 3) {
              o[r, bx * 32 + tx * 2] = o[r, bx * 32 + tx * 2] + cast<f32>(u)
            }
          }
        }
      }
    }
  }
}
)", {{"n", 5}}, true},
  };
}

// The kernel as the GPU runs it: parsed, and scheduled unless gpu_native.
inline loop::Kernel gpu_kernel(const TextKernel& t) {
  loop::Kernel k = loop::parse_kernel(t.text);
  return t.gpu_native ? k : schedule_for_gpu(k);
}

// Small models whose fused groups cover elementwise, broadcast, movement,
// reductions, softmax/normalisation, transcendentals and f16.
struct GroupModel {
  std::string name;
  std::function<void(GraphBuilder&)> build;
};

inline std::vector<GroupModel> group_models() {
  return {
      {"add_relu_broadcast", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::F32, {3, 5, 67});
         Value* y = b.input("y", DType::F32, {67});
         b.output(b.op("Relu", {b.op("Add", {x, y})}));
       }},
      {"rank1_chunked", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::F32, {9000});
         b.output(b.op("Neg", {b.op("Abs", {x})}));
       }},
      {"softmax", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::F32, {6, 77});
         b.output(b.op("Softmax", {x}, {{"axis", Attribute::of_int(-1)}}));
       }},
      {"gelu_tanh_exp", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::F32, {4, 129});
         b.output(b.op("Mul", {b.op("Tanh", {x}), b.op("Exp", {b.op("Sigmoid", {x})})}));
         b.output(b.op("Erf", {x}));
       }},
      {"transpose_reduce", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::F32, {5, 7, 9});
         Value* t = b.op("Transpose", {x}, {{"perm", Attribute::of_ints({2, 0, 1})}});
         b.output(b.op("ReduceSum", {t, b.const_i64({2})}, {{"keepdims", Attribute::of_int(0)}}));
       }},
      {"half_math", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::F32, {8, 33});
         Value* h = b.op("Cast", {x}, {{"to", Attribute::of_int(static_cast<int64_t>(DType::F16))}});
         b.output(b.op("Add", {b.op("Mul", {h, h}), b.op("Sqrt", {b.op("Abs", {h})})}));
       }},
      // Rows of 64: four f32 outputs a thread, and (the Cast is a kernel of
      // its own) eight f16 ones, each gathered into a 16-byte store
      // (codegen/cuda/vector_store.cpp).
      {"wide_rows", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::F32, {3, 5, 64});
         Value* y = b.input("y", DType::F32, {64});
         Value* r = b.op("Relu", {b.op("Add", {x, y})});
         b.output(r);
         b.output(b.op("Cast", {r}, {{"to", Attribute::of_int(static_cast<int64_t>(DType::F16))}}));
       }},
      // bf16 arithmetic rounds after every operation (cvt.rn.bf16.f32 from
      // sm_80, integer code before): NaN payloads, infinities, ties.
      {"bf16_math", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::F32, {8, 33});
         Value* h = b.op("Cast", {x}, {{"to", Attribute::of_int(static_cast<int64_t>(DType::BF16))}});
         b.output(b.op("Add", {b.op("Mul", {h, h}), b.op("Sqrt", {b.op("Abs", {h})})}));
       }},
      {"int_where", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::I32, {10, 11});
         Value* y = b.input("y", DType::I32, {11});
         b.output(b.op("Where", {b.op("Less", {x, y}), b.op("Sub", {x, y}), b.op("Mul", {x, y})}));
       }},
  };
}

// Every compiled group of the model with the GPU nest, before
// schedule_for_gpu (the loop IR the evaluator runs fastest).
inline std::vector<LoweredGroup> gpu_nest_groups(Model& m) {
  PassOptions po;
  run_pipeline(m, po);
  std::vector<LoweredGroup> out;
  for (const FusionGroup& g : plan_fusion(*m.graph, OpRegistry::global()).groups)
    if (g.compiled) out.push_back(lower_group_gpu_nest(g, OpRegistry::global()));
  return out;
}

// Every fused group of the model, lowered for the GPU (groups that do not
// lower are skipped: the interpreter would run them).
inline std::vector<LoweredGroup> lowered_gpu_groups(Model& m) {
  PassOptions po;
  run_pipeline(m, po);
  const FusionPlan plan = plan_fusion(*m.graph, OpRegistry::global());
  std::vector<LoweredGroup> out;
  for (const FusionGroup& g : plan.groups) {
    if (!g.compiled) continue;
    out.push_back(lower_group_for_gpu(g, OpRegistry::global()));
  }
  return out;
}

// ---- buffers -----------------------------------------------------------------

// One host buffer per kernel param, sized from the param shapes.
struct HostBuffers {
  std::vector<std::vector<uint8_t>> data;
  std::vector<void*> ptrs() {
    std::vector<void*> p;
    for (auto& d : data) p.push_back(d.data());
    return p;
  }
};

inline std::vector<int64_t> sym_values(const loop::Kernel& k, const std::map<std::string, int64_t>& syms) {
  std::vector<int64_t> v;
  for (const std::string& s : k.syms) v.push_back(syms.at(s));
  return v;
}

inline int64_t element_count(const loop::Buffer& b, const std::map<std::string, int64_t>& syms) {
  int64_t n = 1;
  for (const loop::Expr& d : b.shape) n *= loop::eval_index(d, syms);
  return n;
}

// A random value of type t: mostly ordinary numbers; with `special`, one in
// eight is an edge value (NaN, infinities, signed zeros, subnormals, huge;
// 0, -1, MIN, MAX for integers).
inline uint64_t random_bits(DType t, bool special, std::mt19937_64& rng) {
  const bool edge = special && rng() % 8 == 0;
  if (is_float(t)) {
    static const double kEdges[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -3e-42, 1e30, -7e37, 1e300};
    double v = edge ? kEdges[rng() % 10] : std::uniform_real_distribution<double>(-4.0, 4.0)(rng);
    if (t == DType::F64) return std::bit_cast<uint64_t>(v);
    const float f = static_cast<float>(v);
    if (t == DType::F32) return std::bit_cast<uint32_t>(f);
    return t == DType::F16 ? f32_to_f16_bits(f) : f32_to_bf16_bits(f);
  }
  if (t == DType::Bool) return rng() & 1;
  const int bits = int_bits(t);
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  if (edge) {
    const uint64_t min = is_signed_int(t) ? uint64_t{1} << (bits - 1) : 0;
    const uint64_t kEdges[] = {0, mask, 1, min, min - 1};
    return kEdges[rng() % 5] & mask;
  }
  return rng() & mask;
}

inline HostBuffers random_buffers(const loop::Kernel& k, const std::map<std::string, int64_t>& syms, uint64_t seed,
                                  bool special = true) {
  std::mt19937_64 rng(seed);
  HostBuffers h;
  for (const loop::BufferRef& b : k.params) {
    const size_t size = dtype_storage_size(b->dtype);
    const int64_t n = element_count(*b, syms);
    std::vector<uint8_t> d(static_cast<size_t>(n) * size);
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t v = random_bits(b->dtype, special, rng);
      std::memcpy(d.data() + static_cast<size_t>(i) * size, &v, size);  // little endian
    }
    h.data.push_back(std::move(d));
  }
  return h;
}

inline bool is_nan_bits(DType t, uint64_t v) {
  switch (t) {
    case DType::F64: return std::isnan(std::bit_cast<double>(v));
    case DType::F32: return std::isnan(std::bit_cast<float>(static_cast<uint32_t>(v)));
    case DType::F16: return (v & 0x7c00) == 0x7c00 && (v & 0x3ff) != 0;
    case DType::BF16: return (v & 0x7f80) == 0x7f80 && (v & 0x7f) != 0;
    default: return false;
  }
}

inline double float_value(DType t, uint64_t v) {
  switch (t) {
    case DType::F64: return std::bit_cast<double>(v);
    case DType::F32: return std::bit_cast<float>(static_cast<uint32_t>(v));
    case DType::F16: return f16_bits_to_f32(static_cast<uint16_t>(v));
    case DType::BF16: return bf16_bits_to_f32(static_cast<uint16_t>(v));
    default: return 0;
  }
}

// Whether the kernel has a gpu.lanes reduction whose result depends on the
// order of its operations (a float sum or product): the GPU combines the
// threads' partials in a tree, the evaluator runs the loop in order.
inline bool has_reordered_reduction(const loop::Kernel& k) {
  bool found = false;
  loop::visit_stmt(k.body, [&](const loop::Stmt& s) {
    if (s->kind != loop::StmtKind::For || s->for_kind != loop::ForKind::GpuLanes) return;
    const loop::StmtNode* u = loop::lanes_reduction_update(*s);
    found = found || (u && is_float(u->buffer->dtype) &&
                      (u->value->binary == loop::BinaryOp::Add || u->value->binary == loop::BinaryOp::Mul));
  }, [](const loop::Expr&) {});
  return found;
}

// "" when every output is bitwise equal (any two NaNs of a float type
// count as equal); else the first difference. With rel > 0 (kernels with a
// reordered reduction), finite float values may differ by rel times the
// largest finite magnitude in their row (the output's last dimension) for
// f32, 1e-8 of that for f64, and one unit in the last place of that
// magnitude for f16 (2^-10) and bf16 (2^-7); NaNs and infinities must
// match, other types bitwise.
inline std::string compare_outputs(const loop::Kernel& k, const HostBuffers& got, const HostBuffers& want,
                                   double rel = 0) {
  for (size_t p = k.num_inputs; p < k.params.size(); ++p) {
    const loop::Buffer& b = *k.params[p];
    const size_t size = dtype_storage_size(b.dtype);
    const size_t n = want.data[p].size() / size;
    const auto bits = [&](const HostBuffers& h, size_t i) {
      uint64_t v = 0;
      std::memcpy(&v, h.data[p].data() + i * size, size);
      return v;
    };
    const bool close = rel > 0 && is_float(b.dtype);
    const double tol = b.dtype == DType::F64 ? rel * 1e-8 : b.dtype == DType::F16 ? std::max(rel, 0x1p-10)
                       : b.dtype == DType::BF16                                    ? std::max(rel, 0x1p-7)
                                                                                   : rel;
    size_t row = 1;
    if (close && !b.shape.empty()) {
      int64_t last = 0;
      if (loop::as_const_int(b.shape.back(), &last) && last > 0) row = static_cast<size_t>(last);
      if (row == 1 || n % row) row = n ? n : 1;  // symbolic: the whole output
    }
    double row_max = 0;
    for (size_t i = 0; i < n; ++i) {
      if (close && i % row == 0) {
        row_max = 0;
        for (size_t j = i; j < std::min(n, i + row); ++j) {
          const double w = std::fabs(float_value(b.dtype, bits(want, j)));
          if (std::isfinite(w)) row_max = std::max(row_max, w);
        }
      }
      const uint64_t g = bits(got, i), w = bits(want, i);
      if (g == w || (is_nan_bits(b.dtype, g) && is_nan_bits(b.dtype, w))) continue;
      if (close) {
        const double gv = float_value(b.dtype, g), wv = float_value(b.dtype, w);
        if (std::isfinite(gv) && std::isfinite(wv) && std::fabs(gv - wv) <= tol * row_max) continue;
      }
      return str_cat(k.name, ": output ", b.name, "[", i, "] (", dtype_name(b.dtype), ") is 0x", std::hex, g,
                     ", expected 0x", w, std::dec, close ? str_cat(" (", float_value(b.dtype, g), " vs ",
                                                                   float_value(b.dtype, w), ")") : "");
    }
  }
  return "";
}

// Whether `k` calls a function of CUDA's math library (a few ulp from the
// evaluator's correctly rounded long double ones, loop/intrinsics.h).
inline bool has_native_math(const loop::Kernel& k) {
  const std::set<std::string> native = loop::cuda_native_intrinsics();
  bool found = false;
  loop::visit_stmt(k.body, [](const loop::Stmt&) {}, [&](const loop::Expr& root) {
    loop::visit_expr(root, [&](const loop::Expr& e) {
      found = found || (e->kind == loop::ExprKind::Call && native.count(e->name));
    });
  });
  return found;
}

// The tolerance tests compare `k`'s GPU results with: 1e-5 (f32, relative
// to the row's magnitude) when it has a reordered reduction or calls CUDA's
// math library, else 0 (bitwise).
inline double lanes_tolerance(const loop::Kernel& k) {
  return has_reordered_reduction(k) || has_native_math(k) ? 1e-5 : 0;
}

}  // namespace tessel::cuda_testing
