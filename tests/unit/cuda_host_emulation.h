// Runs generated CUDA C++ on the host, for tests on machines without a GPU
// (tests/unit/codegen_cuda_mma_test.cpp compiles it with the host compiler
// into a small program). Each CUDA thread of a block is a fiber (ucontext),
// run one at a time: __syncthreads is a block-wide rendezvous, and the
// warp-wide mma.sync a rendezvous of the warp's 32 lanes, after which every
// lane computes its part of D from all lanes' fragments exactly as the PTX
// ISA lays them out ("Matrix Fragments for mma.m16n8k16 with floating point
// type", "... for mma.m16n8k8"). That layout is written here independently
// of the code generator, so the test checks the generator's shared-memory
// addressing against the specification. Blocks run one after another, so
// `__shared__` is `static`.
//
// Arithmetic: products and sums of one mma are done in double and rounded
// to f32 once (real tensor cores round differently, within the tolerances of
// the tests); tf32 operands are the top 19 bits of their registers; cvt.rna
// rounds to nearest, ties away from zero.
#pragma once

#include <ucontext.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

struct ts_emu_dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline ts_emu_dim3 threadIdx, blockIdx, gridDim, blockDim;

namespace ts_emu {

// A thread's asynchronous operations (cp.async copies, wgmmas): those issued
// since its last commit, and its committed groups, oldest first. They take
// effect when the thread waits for their group, the latest point the PTX
// ISA allows; a cp.async also fills its 16 bytes with NaNs when issued, so
// that a read before the wait, or an in-flight wgmma still reading the stage
// it overwrites, sees them.
struct AsyncQueue {
  std::vector<std::function<void()>> open;
  std::vector<std::vector<std::function<void()>>> groups;
  void commit() {
    groups.push_back(std::move(open));
    open.clear();
  }
  // Completes every committed group but the newest `pending`.
  void wait(size_t pending) {
    while (groups.size() > pending) {
      for (const std::function<void()>& op : groups.front()) op();
      groups.erase(groups.begin());
    }
  }
};

struct Fiber {
  ucontext_t ctx;
  AsyncQueue copies, wgmmas;
  std::unique_ptr<char[]> stack;
  unsigned tid = 0;
  bool done = false;
  const unsigned long* wait_gen = nullptr;  // blocked while *wait_gen == wait_value
  unsigned long wait_value = 0;
};

constexpr size_t kStack = 256 * 1024;

inline ucontext_t scheduler;
inline std::vector<Fiber>* fibers = nullptr;
inline size_t current = 0;
inline std::function<void()> kernel_call;

// Block and warp rendezvous: a generation counter and the arrivals.
struct Barrier {
  unsigned long gen = 0;
  unsigned arrived = 0;
};
inline Barrier block_barrier;
inline Barrier warp_barrier[32];
inline Barrier named_barrier[16];  // bar.sync 1-15

// An mbarrier's state, by its shared address (reset per block): the phase
// count, the arrivals still expected in this phase, and the transaction
// bytes outstanding. A phase completes when both reach zero.
struct Mbarrier {
  unsigned long phase = 0;
  int expected = 0, pending = 0;
  long long tx = 0;
};
inline std::vector<std::pair<unsigned, Mbarrier>> mbarriers;

inline unsigned live_in(unsigned first, unsigned count) {
  unsigned n = 0;
  for (unsigned i = first; i < first + count && i < fibers->size(); ++i) n += !(*fibers)[i].done;
  return n;
}

inline void wait(Barrier& b, unsigned first, unsigned count) {
  const unsigned long g = b.gen;
  if (++b.arrived >= live_in(first, count)) {
    b.arrived = 0;
    ++b.gen;
    return;
  }
  Fiber& f = (*fibers)[current];
  f.wait_gen = &b.gen;
  f.wait_value = g;
  swapcontext(&f.ctx, &scheduler);
}

inline void syncthreads() { wait(block_barrier, 0, static_cast<unsigned>(fibers->size())); }
inline void syncwarp() {
  const unsigned w = threadIdx.x >> 5;
  wait(warp_barrier[w], w * 32, 32);
}

// __shfl_xor_sync: each lane posts its value, the warp meets, each reads its
// partner's, and the warp meets again before the slots are reused.
inline unsigned char shfl_slot[1024][8];
template <class T>
T shfl_xor(T v, int lane_mask) {
  static_assert(sizeof(T) <= 8);
  std::memcpy(shfl_slot[threadIdx.x], &v, sizeof v);
  syncwarp();
  T r;
  std::memcpy(&r, shfl_slot[threadIdx.x ^ static_cast<unsigned>(lane_mask)], sizeof r);
  syncwarp();
  return r;
}

inline void trampoline() {
  kernel_call();
  (*fibers)[current].done = true;
  swapcontext(&(*fibers)[current].ctx, &scheduler);
}

// Runs `call` (the kernel with its arguments) on a grid of 1-D blocks.
inline void launch(unsigned gx, unsigned gy, unsigned gz, unsigned threads, std::function<void()> call) {
  kernel_call = std::move(call);
  gridDim = {gx, gy, gz};
  blockDim = {threads, 1, 1};
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        blockIdx = {x, y, z};
        std::vector<Fiber> fs(threads);
        fibers = &fs;
        block_barrier = {};
        for (Barrier& b : warp_barrier) b = {};
        for (Barrier& b : named_barrier) b = {};
        mbarriers.clear();
        for (unsigned t = 0; t < threads; ++t) {
          Fiber& f = fs[t];
          f.tid = t;
          f.stack.reset(new char[kStack]);
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.get();
          f.ctx.uc_stack.ss_size = kStack;
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, trampoline, 0);
        }
        for (bool progress = true; progress;) {
          progress = false;
          for (size_t i = 0; i < fs.size(); ++i) {
            Fiber& f = fs[i];
            if (f.done || (f.wait_gen && *f.wait_gen == f.wait_value)) continue;
            f.wait_gen = nullptr;
            current = i;
            threadIdx = {f.tid, 0, 0};
            swapcontext(&scheduler, &f.ctx);
            progress = true;
            // A finished thread no longer holds the others at a barrier.
            if (f.done) {
              if (block_barrier.arrived && block_barrier.arrived >= live_in(0, threads)) {
                block_barrier.arrived = 0;
                ++block_barrier.gen;
              }
              Barrier& w = warp_barrier[f.tid >> 5];
              if (w.arrived && w.arrived >= live_in(f.tid & ~31u, 32)) {
                w.arrived = 0;
                ++w.gen;
              }
            }
          }
        }
        for (const Fiber& f : fs)
          if (!f.done) {
            std::fprintf(stderr, "ts_emu: deadlock in block (%u, %u, %u)\n", x, y, z);
            std::exit(3);
          }
      }
}

// ---- bit patterns ----
inline unsigned f2u(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float u2f(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }

inline unsigned short f2h(float f) { return std::bit_cast<unsigned short>(static_cast<_Float16>(f)); }
inline float h2f(unsigned short h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }

inline float bf16_value(unsigned short b) { return u2f(static_cast<unsigned>(b) << 16); }
inline float tf32_value(unsigned r) { return u2f(r & 0xffffe000u); }

// ---- mma.sync, from all lanes' fragments ----
struct Lane {
  unsigned a[4], b[2];
  float c[4];
};
inline Lane lanes[32][32];  // [warp][lane]

// kind 0: bf16 m16n8k16, 1: f16 m16n8k16, 2: tf32 m16n8k8.
inline void mma(int kind, float* d, const unsigned* a, const unsigned* b) {
  const unsigned w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  Lane& me = lanes[w][lane];
  std::memcpy(me.a, a, sizeof me.a);
  std::memcpy(me.b, b, sizeof me.b);
  std::memcpy(me.c, d, sizeof me.c);
  syncwarp();
  const int K = kind == 2 ? 8 : 16;
  double A[16][16] = {}, B[16][8] = {}, C[16][8] = {};
  const auto half = [&](unsigned reg, int hi) {
    const unsigned short bits = static_cast<unsigned short>(hi ? reg >> 16 : reg & 0xffffu);
    return kind == 0 ? bf16_value(bits) : h2f(bits);
  };
  for (unsigned l = 0; l < 32; ++l) {
    const Lane& x = lanes[w][l];
    const int g = static_cast<int>(l >> 2), t = static_cast<int>(l & 3);
    if (kind == 2) {
      // A: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); B: b0 (t, g), b1 (t + 4, g).
      A[g][t] = tf32_value(x.a[0]);
      A[g + 8][t] = tf32_value(x.a[1]);
      A[g][t + 4] = tf32_value(x.a[2]);
      A[g + 8][t + 4] = tf32_value(x.a[3]);
      B[t][g] = tf32_value(x.b[0]);
      B[t + 4][g] = tf32_value(x.b[1]);
    } else {
      // A: a0..a7: rows g (a0, a1, a4, a5) / g + 8, columns 2t + (i & 1) (+ 8 for i >= 4).
      for (int i = 0; i < 8; ++i) {
        const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
        const int col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
        A[row][col] = half(x.a[i / 2], i & 1);
      }
      // B: b0..b3: rows 2t + (i & 1) (+ 8 for i >= 2), column g.
      for (int i = 0; i < 4; ++i) B[t * 2 + (i & 1) + (i >= 2 ? 8 : 0)][g] = half(x.b[i / 2], i & 1);
    }
    // C: c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1).
    for (int i = 0; i < 4; ++i) C[i < 2 ? g : g + 8][t * 2 + (i & 1)] = x.c[i];
  }
  const int g = static_cast<int>(lane >> 2), t = static_cast<int>(lane & 3);
  for (int i = 0; i < 4; ++i) {
    const int row = i < 2 ? g : g + 8, col = t * 2 + (i & 1);
    double s = C[row][col];
    for (int k = 0; k < K; ++k) s += A[row][k] * B[k][col];
    d[i] = static_cast<float>(s);
  }
  syncwarp();
}

// ---- ldmatrix.sync.aligned.m8n8.{x2,x4}[.trans].shared.b16 ----
// Lane l gives the address of row l % 8 of matrix l / 8; register j of lane
// l is, of matrix j, row l / 4 and columns 2 (l % 4), 2 (l % 4) + 1 (low
// half first), or with .trans column l / 4 of rows 2 (l % 4) and + 1.
inline const void* ldmatrix_rows[32][32];  // [warp][lane]

inline void ldmatrix(int count, bool trans, unsigned* d, const void* row) {
  const unsigned w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  ldmatrix_rows[w][lane] = row;
  syncwarp();
  for (int j = 0; j < count; ++j) {
    const auto half = [&](unsigned r, unsigned col) {
      unsigned short h;
      std::memcpy(&h, static_cast<const unsigned char*>(ldmatrix_rows[w][j * 8 + r]) + 2 * col, 2);
      return static_cast<unsigned>(h);
    };
    const unsigned q = lane % 4, p = lane / 4;
    d[j] = trans ? half(2 * q, p) | half(2 * q + 1, p) << 16 : half(p, 2 * q) | half(p, 2 * q + 1) << 16;
  }
  syncwarp();
}

// ---- shared-memory addresses and wgmma.mma_async (sm_90a) ----
// The dynamic shared memory is a static array (`window`); its shared-window
// address is its offset + 16, so that the kernel's realignment to 1024 bytes
// is exercised (a real window address is 16-byte aligned, no more is promised).
inline unsigned char* window = nullptr;
inline unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(static_cast<const unsigned char*>(p) - window) + 16u;
}

// A 16-bit element of a matrix descriptor's operand at byte address `a` of
// the window, through the 128-byte swizzle (PTX ISA, "Shared Memory Matrix
// Layout": Swizzle<3,4,3> on byte addresses: bits 4-6 xor bits 7-9).
inline unsigned short swizzled_half(unsigned a) {
  const unsigned phys = a ^ (((a >> 7) & 7u) << 4);
  unsigned short h;
  std::memcpy(&h, window + (phys - 16u), 2);
  return h;
}

struct Descriptor {
  unsigned start, lbo, sbo;
};
inline Descriptor decode(unsigned long long d) {
  if ((d >> 62) != 1) {
    std::fprintf(stderr, "ts_emu: wgmma descriptor without the 128-byte swizzle\n");
    std::exit(4);
  }
  return {static_cast<unsigned>(d & 0x3fffu) << 4, static_cast<unsigned>((d >> 16) & 0x3fffu) << 4,
          static_cast<unsigned>((d >> 32) & 0x3fffu) << 4};
}

// wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}, A and B from shared
// memory, scale-d 1: D[m][n] += sum_k A[m][k] B[k][n] over k < 16. Canonical
// 128-byte swizzled layouts in 16-bit elements (T = 8):
//   K-major (A; B with trans_b 0): ((8, m), (T, 2k)) : ((8T, SBO), (1, T)):
//     row r at (r / 8) SBO + (r % 8) 128 bytes, k contiguous;
//   N-major (B with trans_b 1): ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO)):
//     column n at (n / 64) LBO + 2 (n % 64), k at (k / 8) SBO + (k % 8) 128.
// Accumulators (PTX ISA, "Matrix Fragments for wgmma .m64nNk16"): warp w of
// the warpgroup, lane (g = lane / 4, t = lane % 4), register 4 j + i holds
// row 16 w + g + 8 (i / 2), column 8 j + 2 t + i % 2. Every thread reads
// the operands from shared memory itself: no rendezvous is needed.
inline void wgmma_now(bool bf16, int n, int trans_b, float* d, unsigned long long da, unsigned long long db,
                      int scale_d) {
  const Descriptor a = decode(da), b = decode(db);
  const auto value = [&](unsigned short h) { return bf16 ? bf16_value(h) : h2f(h); };
  const auto A = [&](unsigned m, unsigned k) { return value(swizzled_half(a.start + m / 8 * a.sbo + m % 8 * 128 + 2 * k)); };
  const auto B = [&](unsigned k, unsigned c) {
    const unsigned at = trans_b ? b.start + c / 64 * b.lbo + 2 * (c % 64) + k / 8 * b.sbo + k % 8 * 128
                                : b.start + c / 8 * b.sbo + c % 8 * 128 + 2 * k;
    return value(swizzled_half(at));
  };
  const unsigned w = (threadIdx.x >> 5) & 3u, lane = threadIdx.x & 31u, g = lane >> 2, t = lane & 3u;
  for (int j = 0; j < n / 8; ++j)
    for (unsigned i = 0; i < 4; ++i) {
      const unsigned row = 16 * w + g + 8 * (i / 2), col = 8 * j + 2 * t + i % 2;
      double s = scale_d ? d[4 * j + i] : 0.0;
      for (unsigned k = 0; k < 16; ++k) s += static_cast<double>(A(row, k)) * B(k, col);
      d[4 * j + i] = static_cast<float>(s);
    }
}

inline AsyncQueue& my_wgmmas() { return (*fibers)[current].wgmmas; }
inline void wgmma(bool bf16, int n, int trans_b, float* d, unsigned long long da, unsigned long long db,
                  int scale_d) {
  my_wgmmas().open.push_back([=] { wgmma_now(bf16, n, trans_b, d, da, db, scale_d); });
}

// The same with A from registers: a[0..3] of each thread of the warp hold
// its 16 rows of A in mma.sync's A fragment layout (a0 row g, k 2t, 2t + 1;
// a1 row g + 8; a2, a3 the same at k + 8). The warp's lanes meet once to
// share their fragments.
inline void wgmma_rs(bool bf16, int n, int trans_b, float* d, const unsigned* a, unsigned long long db) {
  const unsigned w = (threadIdx.x >> 5) & 3u, lane = threadIdx.x & 31u, g = lane >> 2, t = lane & 3u;
  Lane& me = lanes[threadIdx.x >> 5][lane];
  std::memcpy(me.a, a, 4 * sizeof(unsigned));
  syncwarp();
  const auto value = [&](unsigned short h) { return bf16 ? bf16_value(h) : h2f(h); };
  double A[16][16];
  for (unsigned l = 0; l < 32; ++l) {
    const Lane& x = lanes[threadIdx.x >> 5][l];
    const unsigned lg = l >> 2, lt = l & 3u;
    for (unsigned i = 0; i < 8; ++i) {
      const unsigned row = lg + 8 * ((i / 2) & 1), col = 2 * lt + (i & 1) + 8 * (i / 4);
      const unsigned reg = x.a[i / 2];
      A[row][col] = value(static_cast<unsigned short>(i & 1 ? reg >> 16 : reg & 0xffffu));
    }
  }
  syncwarp();
  // A is read at the issue (its registers may be reused once the wgmma is
  // in flight, hence no later); B and D when the group completes.
  (void)w;
  my_wgmmas().open.push_back([=] {
    const Descriptor b = decode(db);
    const auto B = [&](unsigned k, unsigned c) {
      const unsigned at = trans_b ? b.start + c / 64 * b.lbo + 2 * (c % 64) + k / 8 * b.sbo + k % 8 * 128
                                  : b.start + c / 8 * b.sbo + c % 8 * 128 + 2 * k;
      return value(swizzled_half(at));
    };
    for (int j = 0; j < n / 8; ++j)
      for (unsigned i = 0; i < 4; ++i) {
        const unsigned row = g + 8 * (i / 2), col = 8 * j + 2 * t + i % 2;
        double s = d[4 * j + i];
        for (unsigned k = 0; k < 16; ++k) s += A[row][k] * B(k, col);
        d[4 * j + i] = static_cast<float>(s);
      }
  });
}

// ---- mbarriers, TMA copies and named barriers (the warp-specialised GEMM) ----
inline Mbarrier& mbarrier(unsigned addr) {
  for (auto& [a, m] : mbarriers)
    if (a == addr) return m;
  std::fprintf(stderr, "ts_emu: mbarrier at %u used before mbarrier.init\n", addr);
  std::exit(5);
}
inline void mbar_complete_if_done(Mbarrier& m) {
  if (m.pending == 0 && m.tx == 0) {
    ++m.phase;
    m.pending = m.expected;
  }
}
inline void mbar_init(unsigned addr, unsigned count) {
  for (auto& [a, m] : mbarriers)
    if (a == addr) {
      m = Mbarrier{0, static_cast<int>(count), static_cast<int>(count), 0};
      return;
    }
  mbarriers.push_back({addr, Mbarrier{0, static_cast<int>(count), static_cast<int>(count), 0}});
}
inline void mbar_arrive(unsigned addr, long long tx) {
  Mbarrier& m = mbarrier(addr);
  m.tx += tx;
  --m.pending;
  mbar_complete_if_done(m);
}
// A plain arrival (a consumer freeing a buffer) lets the other threads run
// at once, so that a buffer freed before its last reader is done (a wgmma
// still in flight) is refilled under that reader and the test sees it.
inline void mbar_arrive_and_yield(unsigned addr) {
  mbar_arrive(addr, 0);
  swapcontext(&(*fibers)[current].ctx, &scheduler);
}
// try_wait.parity p succeeds once the phase of parity p has completed: the
// current phase's parity is not p (the phase before the first counts as
// completed with parity 1).
inline void mbar_wait(unsigned addr, unsigned parity) {
  Mbarrier& m = mbarrier(addr);
  while ((m.phase & 1u) == (parity & 1u)) {
    Fiber& f = (*fibers)[current];
    f.wait_gen = &m.phase;
    f.wait_value = m.phase;
    swapcontext(&f.ctx, &scheduler);
  }
}

// A tensor map as the emulation's runner builds it from a TensorMapSpec.
struct TensorMap {
  const unsigned char* base;
  int rank;
  long long dims[5];
  long long strides[5];  // bytes; [0] unused (elements are contiguous)
  int box[5];
};

// cp.async.bulk.tensor (tile mode, 2-byte elements, 128-byte swizzle): the
// box at coordinates c is written row after row (128 bytes each: the box is
// 64 elements wide) from shared address dst, each 16-byte chunk moved by the
// swizzle of its address (bits 4-6 xor bits 7-9), zeros outside the dims;
// then its bytes complete on the mbarrier. Done at once: one legal order of
// the asynchronous copy.
inline void tma_copy(unsigned dst, const TensorMap* m, unsigned bar, const int* c) {
  long long rows = 1;
  for (int d = 1; d < m->rank; ++d) rows *= m->box[d];
  for (long long r = 0; r < rows; ++r) {
    long long rest = r, offset = 0;
    bool inside = true;
    for (int d = 1; d < m->rank; ++d) {
      const long long x = c[d] + rest % m->box[d];
      rest /= m->box[d];
      inside = inside && x >= 0 && x < m->dims[d];
      offset += x * m->strides[d];
    }
    for (int e = 0; e < m->box[0]; ++e) {
      const long long x = c[0] + e;
      unsigned short h = 0;
      if (inside && x >= 0 && x < m->dims[0]) std::memcpy(&h, m->base + offset + 2 * x, 2);
      const unsigned a = dst + static_cast<unsigned>(r * 2 * m->box[0] + 2 * e);
      const unsigned phys = a ^ (((a >> 7) & 7u) << 4);
      std::memcpy(window + (phys - 16u), &h, 2);
    }
  }
  Mbarrier& b = mbarrier(bar);
  b.tx -= rows * 2 * m->box[0];
  mbar_complete_if_done(b);
}

// bar.sync id, n: the n threads of the aligned group holding this thread
// (the GEMM's named barriers are one warpgroup each).
inline void bar_sync(int id, int n) {
  const unsigned first = threadIdx.x / static_cast<unsigned>(n) * static_cast<unsigned>(n);
  wait(named_barrier[id], first, static_cast<unsigned>(n));
}

// cp.async of 16 bytes (zeros unless `full`): NaNs now, the data when the
// thread waits for its group. The source is read now (global memory does
// not change under a kernel's feet here).
inline AsyncQueue& my_copies() { return (*fibers)[current].copies; }
inline void cp_async16(void* smem, const void* gmem, bool full) {
  unsigned char data[16] = {};
  if (full) std::memcpy(data, gmem, 16);
  std::memset(smem, 0xff, 16);
  std::vector<unsigned char> bytes(data, data + 16);
  my_copies().open.push_back([smem, bytes] { std::memcpy(smem, bytes.data(), 16); });
}

// cp.async.mbarrier.arrive.noinc: the thread's copies land (all of them,
// committed or not), then the arrival; one legal order.
inline void cp_async_arrive(unsigned bar) {
  my_copies().commit();
  my_copies().wait(0);
  mbar_arrive(bar, 0);
}

inline int atomic_cas(int* p, int expected, int desired) {
  const int old = *p;
  if (old == expected) *p = desired;
  return old;
}

}  // namespace ts_emu

#define __syncthreads() ts_emu::syncthreads()
#define __shfl_xor_sync(mask, v, o) ts_emu::shfl_xor(v, o)
inline unsigned __float_as_uint(float f) { return ts_emu::f2u(f); }
inline float __uint_as_float(unsigned u) { return ts_emu::u2f(u); }
inline float __int_as_float(int i) { return ts_emu::u2f(static_cast<unsigned>(i)); }
inline long long __double_as_longlong(double d) { return std::bit_cast<long long>(d); }
inline double __longlong_as_double(long long l) { return std::bit_cast<double>(l); }
inline int atomicCAS(int* p, int expected, int desired) { return ts_emu::atomic_cas(p, expected, desired); }

// What codegen/cuda's mma prelude defines, on the host.
#define TS_EMU_MMA_PRELUDE                                                                              \
  inline void ts_mma_bf16(float* d, const unsigned* a, const unsigned* b) { ts_emu::mma(0, d, a, b); } \
  inline void ts_mma_f16(float* d, const unsigned* a, const unsigned* b) { ts_emu::mma(1, d, a, b); }  \
  inline void ts_mma_tf32(float* d, const unsigned* a, const unsigned* b) { ts_emu::mma(2, d, a, b); } \
  inline unsigned ts_tf32(float x) {                                                                    \
    const unsigned u = ts_emu::f2u(x);                                                                  \
    if ((u & 0x7f800000u) == 0x7f800000u) return u;                                                     \
    return (u + 0x1000u) & 0xffffe000u;                                                                 \
  }                                                                                                     \
  inline unsigned ts_tf32_small(float x, unsigned big) {                                                \
    const float hi = ts_emu::u2f(big);                                                                  \
    return std::fabs(hi) < INFINITY ? ts_tf32(x - hi) : 0u;                                             \
  }                                                                                                     \
  inline unsigned ts_pack_bf16(float lo, float hi) {                                                    \
    return (ts_emu::f2u(lo) >> 16) | (ts_emu::f2u(hi) & 0xffff0000u);                                   \
  }                                                                                                     \
  inline unsigned ts_pack_f16(float lo, float hi) {                                                     \
    return static_cast<unsigned>(ts_f2h(lo)) | (static_cast<unsigned>(ts_f2h(hi)) << 16);               \
  }                                                                                                     \
  struct __align__(16) ts_u4 {                                                                          \
    unsigned x, y, z, w;                                                                                \
  };                                                                                                    \
  struct __align__(8) ts_f2 {                                                                           \
    float x, y;                                                                                         \
  };                                                                                                    \
  inline void ts_ldsm_x4(unsigned* d, const void* row) { ts_emu::ldmatrix(4, false, d, row); }          \
  inline void ts_ldsm_x2(unsigned* d, const void* row) { ts_emu::ldmatrix(2, false, d, row); }          \
  inline void ts_ldsm_x2_trans(unsigned* d, const void* row) { ts_emu::ldmatrix(2, true, d, row); }    \
  inline void ts_ldsm_x4_trans(unsigned* d, const void* row) { ts_emu::ldmatrix(4, true, d, row); }    \
  inline void ts_cp16(void* smem, const void* gmem, bool full) { ts_emu::cp_async16(smem, gmem, full); } \
  inline void ts_cp16_at(unsigned char* base, unsigned off, const void* gmem, bool full) {              \
    ts_cp16(base + off, gmem, full);                                                                    \
  }                                                                                                     \
  inline unsigned ts_smem_addr(const void* p) { return ts_emu::smem_addr(p); }                          \
  inline void ts_cp_commit() { ts_emu::my_copies().commit(); }                                          \
  template <int N>                                                                                      \
  inline void ts_cp_wait() {                                                                            \
    ts_emu::my_copies().wait(N);                                                                        \
  }

// What codegen/cuda's wgmma prelude defines, on the host: a wgmma completes
// when its thread waits for its group (AsyncQueue); the fences are no-ops.
#define TS_EMU_WGMMA_HELPER(type, n, tb)                                                          \
  inline void ts_wgmma_##type##_n##n##_t##tb(float* d, unsigned long long a, unsigned long long b,  \
                                              int scale_d = 1) {                                  \
    ts_emu::wgmma(#type[0] == 'b', n, tb, d, a, b, scale_d);                                     \
  }
#define TS_EMU_WGMMA_RS_HELPER(type, n)                                                           \
  inline void ts_wgmma_rs_##type##_n##n##_t1(float* d, const unsigned* a, unsigned long long b) { \
    ts_emu::wgmma_rs(#type[0] == 'b', n, 1, d, a, b);                                            \
  }
#define __grid_constant__
#define TS_EMU_WGMMA_PRELUDE                                                                     \
  using ts_tmap = ts_emu::TensorMap;                                                             \
  inline void ts_mbar_init(unsigned bar, unsigned count) { ts_emu::mbar_init(bar, count); }      \
  inline void ts_mbar_fence_init() {}                                                            \
  inline void ts_mbar_expect_tx(unsigned bar, unsigned bytes) { ts_emu::mbar_arrive(bar, bytes); } \
  inline void ts_mbar_arrive(unsigned bar) { ts_emu::mbar_arrive_and_yield(bar); }               \
  inline void ts_cp_mbar_arrive(unsigned bar) { ts_emu::cp_async_arrive(bar); }                  \
  inline void ts_mbar_wait(unsigned bar, unsigned parity) { ts_emu::mbar_wait(bar, parity); }    \
  inline void ts_tma_2d(unsigned dst, const ts_tmap* m, unsigned bar, int c0, int c1) {          \
    const int c[2] = {c0, c1};                                                                   \
    ts_emu::tma_copy(dst, m, bar, c);                                                            \
  }                                                                                              \
  inline void ts_tma_3d(unsigned dst, const ts_tmap* m, unsigned bar, int c0, int c1, int c2) {  \
    const int c[3] = {c0, c1, c2};                                                               \
    ts_emu::tma_copy(dst, m, bar, c);                                                            \
  }                                                                                              \
  inline void ts_bar_sync(int id, int n) { ts_emu::bar_sync(id, n); }                            \
  template <int N>                                                                               \
  inline void ts_setmaxnreg_inc() {}                                                             \
  template <int N>                                                                               \
  inline void ts_setmaxnreg_dec() {}                                                             \
  inline void ts_fence_async_smem() {}                                                           \
  inline void ts_wgmma_fence() {}                                                                \
  inline void ts_wgmma_commit() { ts_emu::my_wgmmas().commit(); }                                \
  inline void ts_wgmma_wait0() { ts_emu::my_wgmmas().wait(0); }                                  \
  inline void ts_wgmma_wait1() { ts_emu::my_wgmmas().wait(1); }                                  \
  inline unsigned long long ts_wdesc(unsigned a) {                                               \
    return (unsigned long long)((a & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62); \
  }                                                                                              \
  inline unsigned long long ts_wdesc_n(unsigned a) {                                             \
    return (unsigned long long)((a & 0x3FFFFu) >> 4) | (512ull << 16) | (64ull << 32) | (1ull << 62); \
  }                                                                                              \
  TS_EMU_WGMMA_HELPER(bf16, 64, 0)                                                               \
  TS_EMU_WGMMA_HELPER(bf16, 64, 1)                                                               \
  TS_EMU_WGMMA_HELPER(bf16, 128, 0)                                                              \
  TS_EMU_WGMMA_HELPER(bf16, 128, 1)                                                              \
  TS_EMU_WGMMA_HELPER(bf16, 256, 0)                                                              \
  TS_EMU_WGMMA_HELPER(bf16, 256, 1)                                                              \
  TS_EMU_WGMMA_HELPER(f16, 64, 0)                                                                \
  TS_EMU_WGMMA_HELPER(f16, 64, 1)                                                                \
  TS_EMU_WGMMA_HELPER(f16, 128, 0)                                                               \
  TS_EMU_WGMMA_HELPER(f16, 128, 1)                                                               \
  TS_EMU_WGMMA_HELPER(f16, 256, 0)                                                               \
  TS_EMU_WGMMA_HELPER(f16, 256, 1)                                                               \
  TS_EMU_WGMMA_RS_HELPER(bf16, 64)                                                               \
  TS_EMU_WGMMA_RS_HELPER(bf16, 128)                                                              \
  TS_EMU_WGMMA_RS_HELPER(bf16, 256)                                                              \
  TS_EMU_WGMMA_RS_HELPER(f16, 64)                                                                \
  TS_EMU_WGMMA_RS_HELPER(f16, 128)                                                               \
  TS_EMU_WGMMA_RS_HELPER(f16, 256)
