#include "tessel/runtime/ceiling_kernels.h"

#include <string>

#include "tessel/runtime/cpu_features.h"
#include "tessel/support/strings.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessel {

namespace {

// Read through volatiles, so the compiler cannot fold the chains: every FMA
// must run. acc -> y / (1 - x) = 0.1, far from denormals and overflow.
volatile float g_fma_x = 0.999f, g_fma_y = 1e-4f;

bool has(std::string_view features, const char* name) {
  for (const std::string& f : split(features, ','))
    if (f == std::string("+") + name) return true;
  return false;
}

// The portable fallback: plain C++ the compiler may vectorise as it likes.
float fma_scalar(int64_t iters) {
  float acc[8];
  const float x = g_fma_x, y = g_fma_y;
  for (int c = 0; c < 8; ++c) acc[c] = static_cast<float>(c);
  for (int64_t i = 0; i < iters; ++i)
    for (float& a : acc) a = a * x + y;
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

float read_scalar(const float* p, int64_t n, int64_t reps) {
  float acc[8] = {};
  for (int64_t r = 0; r < reps; ++r)
    for (int64_t i = 0; i < n; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

#if defined(__x86_64__)

// The chain counts cover two FMA pipes of latency up to 8 cycles (the zmm
// kernel) or 6 (ymm), and leave registers for x and y: 16 + 2 of the 32
// zmm registers, 12 + 2 of the 16 ymm ones.
constexpr int kZmmChains = 16, kYmmChains = 12, kXmmChains = 8;
// Eight accumulators of a read round: more than an add's latency times two
// load ports, so the loads, not the adds, set the pace.
constexpr int kReadAccs = 8;

__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  const __m512 x = _mm512_set1_ps(g_fma_x), y = _mm512_set1_ps(g_fma_y);
  __m512 acc[kZmmChains];
  for (int c = 0; c < kZmmChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kZmmChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], x, y);
  }
  for (int c = 1; c < kZmmChains; ++c) acc[0] = _mm512_add_ps(acc[0], acc[c]);
  return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx512f"))) float read_avx512(const float* p, int64_t n, int64_t reps) {
  __m512 acc[kReadAccs];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (int64_t r = 0; r < reps; ++r)
    for (int64_t i = 0; i < n; i += 16 * kReadAccs) {
#pragma GCC unroll 8
      for (int k = 0; k < kReadAccs; ++k) acc[k] = _mm512_add_ps(acc[k], _mm512_loadu_ps(p + i + 16 * k));
    }
  for (int k = 1; k < kReadAccs; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx2,fma"))) float sum_ymm(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  float out[4];
  _mm_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3];
}

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  const __m256 x = _mm256_set1_ps(g_fma_x), y = _mm256_set1_ps(g_fma_y);
  __m256 acc[kYmmChains];
  for (int c = 0; c < kYmmChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kYmmChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], x, y);
  }
  for (int c = 1; c < kYmmChains; ++c) acc[0] = _mm256_add_ps(acc[0], acc[c]);
  return sum_ymm(acc[0]);
}

__attribute__((target("avx2,fma"))) float read_avx2(const float* p, int64_t n, int64_t reps) {
  __m256 acc[kReadAccs];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (int64_t r = 0; r < reps; ++r)
    for (int64_t i = 0; i < n; i += 8 * kReadAccs) {
#pragma GCC unroll 8
      for (int k = 0; k < kReadAccs; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_loadu_ps(p + i + 8 * k));
    }
  for (int k = 1; k < kReadAccs; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  return sum_ymm(acc[0]);
}

// SSE2 has no FMA: a multiply and an add per lane, the same two flops.
float fma_sse2(int64_t iters) {
  const __m128 x = _mm_set1_ps(g_fma_x), y = _mm_set1_ps(g_fma_y);
  __m128 acc[kXmmChains];
  for (int c = 0; c < kXmmChains; ++c) acc[c] = _mm_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 8
    for (int c = 0; c < kXmmChains; ++c) acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], x), y);
  }
  for (int c = 1; c < kXmmChains; ++c) acc[0] = _mm_add_ps(acc[0], acc[c]);
  float out[4];
  _mm_storeu_ps(out, acc[0]);
  return out[0] + out[1] + out[2] + out[3];
}

float read_sse2(const float* p, int64_t n, int64_t reps) {
  __m128 acc[kReadAccs];
  for (__m128& a : acc) a = _mm_setzero_ps();
  for (int64_t r = 0; r < reps; ++r)
    for (int64_t i = 0; i < n; i += 4 * kReadAccs) {
#pragma GCC unroll 8
      for (int k = 0; k < kReadAccs; ++k) acc[k] = _mm_add_ps(acc[k], _mm_loadu_ps(p + i + 4 * k));
    }
  for (int k = 1; k < kReadAccs; ++k) acc[0] = _mm_add_ps(acc[0], acc[k]);
  float out[4];
  _mm_storeu_ps(out, acc[0]);
  return out[0] + out[1] + out[2] + out[3];
}

#endif  // __x86_64__

}  // namespace

const CeilingKernels& ceiling_kernels_for(std::string_view cpu_features) {
  static const CeilingKernels scalar{"scalar", 1, 8, fma_scalar, read_scalar};
#if defined(__x86_64__)
  static const CeilingKernels zmm{"avx512f", 16, kZmmChains, fma_avx512, read_avx512};
  static const CeilingKernels ymm{"avx2+fma", 8, kYmmChains, fma_avx2, read_avx2};
  static const CeilingKernels xmm{"sse2", 4, kXmmChains, fma_sse2, read_sse2};
  if (has(cpu_features, "avx512f")) return zmm;
  if (has(cpu_features, "avx2") && has(cpu_features, "fma")) return ymm;
  if (has(cpu_features, "sse2")) return xmm;
#endif
  return scalar;
}

const CeilingKernels& host_ceiling_kernels() {
  static const CeilingKernels& k = ceiling_kernels_for(detected_cpu_features());
  return k;
}

}  // namespace tessel
