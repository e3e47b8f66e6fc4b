// Register-blocked double matrix product for the reference kernels (see
// matmul_core.h for the exactness contract). The reference interpreter runs
// real models (BERT, GPT-2, ViT), where this loop is most of the time.
#include "tessel/ops/matmul_core.h"

#include <cstring>

namespace tessel::mathops {

// The v4d helpers below are inlined into the one function that uses them, so
// the ABI note GCC gives for AVX-sized arguments does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

// Four doubles; on plain x86-64 the compiler splits it into two SSE2 halves.
typedef double v4d __attribute__((vector_size(32)));

inline v4d load4(const double* p) {
  v4d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(double* p, v4d v) { std::memcpy(p, &v, sizeof v); }

}  // namespace

// The AVX2 clone runs 4-wide; the ISO C++ mode we build in never contracts
// a*b + c into an FMA, so both clones round identically.
__attribute__((target_clones("avx2", "default")))
void matmul_accumulate_f64(const double* A, const double* B, double* C, int64_t M, int64_t K, int64_t N) {
  constexpr int64_t KB = 128, NB = 256;
  for (int64_t j0 = 0; j0 < N; j0 += NB) {
    const int64_t j1 = std::min(N, j0 + NB);
    for (int64_t k0 = 0; k0 < K; k0 += KB) {
      const int64_t k1 = std::min(K, k0 + KB);
      int64_t i = 0;
      // 4 x 4 tiles of C held in registers while k runs over the panel.
      for (; i + 4 <= M; i += 4) {
        const double* a0 = A + i * K;
        const double* a1 = a0 + K;
        const double* a2 = a1 + K;
        const double* a3 = a2 + K;
        double* c0p = C + i * N;
        int64_t j = j0;
        for (; j + 4 <= j1; j += 4) {
          v4d c0 = load4(c0p + j), c1 = load4(c0p + N + j), c2 = load4(c0p + 2 * N + j),
              c3 = load4(c0p + 3 * N + j);
          for (int64_t k = k0; k < k1; ++k) {
            const v4d b = load4(B + k * N + j);
            c0 += a0[k] * b;
            c1 += a1[k] * b;
            c2 += a2[k] * b;
            c3 += a3[k] * b;
          }
          store4(c0p + j, c0);
          store4(c0p + N + j, c1);
          store4(c0p + 2 * N + j, c2);
          store4(c0p + 3 * N + j, c3);
        }
        for (; j < j1; ++j)
          for (int64_t r = 0; r < 4; ++r) {
            const double* ar = A + (i + r) * K;
            double c = C[(i + r) * N + j];
            for (int64_t k = k0; k < k1; ++k) c += ar[k] * B[k * N + j];
            C[(i + r) * N + j] = c;
          }
      }
      // Remaining rows: the plain i-k-j order.
      for (; i < M; ++i) {
        double* crow = C + i * N;
        for (int64_t k = k0; k < k1; ++k) {
          const double a = A[i * K + k];
          const double* brow = B + k * N;
          for (int64_t j = j0; j < j1; ++j) crow[j] += a * brow[j];
        }
      }
    }
  }
}

}  // namespace tessel::mathops
