// Register-blocked double matrix product for the reference kernels (see
// matmul_core.h for the exactness contract). The reference interpreter runs
// real models (BERT, GPT-2, ViT), where this loop is most of the time.
//
// Layout: C is cut into panels of NB columns; for each panel and each block
// of KB rows of B, that KB x NB block of B is packed into strips of 8 columns
// (kb x 8, contiguous), then every 4-row band of A runs over the strips with
// a 4 x 8 tile of C held in registers.
#include "tessel/ops/matmul/matmul_core.h"

#include <cstring>
#include <vector>

namespace tessel::mathops {

namespace {

// Four doubles; on plain x86-64 the compiler splits it into two SSE2 halves.
typedef double v4d __attribute__((vector_size(32)));

constexpr int64_t KB = 128, NB = 256, TW = 8;  // TW: tile width (columns)

// Loads/stores without passing vectors through function arguments.
#define TS_LOAD4(dst, src) std::memcpy(&(dst), (src), sizeof(v4d))
#define TS_STORE4(dst, src) std::memcpy((dst), &(src), sizeof(v4d))

}  // namespace

// The AVX2 clone runs 4-wide; the ISO C++ mode we build in never contracts
// a*b + c into an FMA, so both clones round identically.
__attribute__((target_clones("avx2", "default")))
void matmul_accumulate_f64(const double* A, const double* B, double* C, int64_t M, int64_t K, int64_t N) {
  std::vector<double> pack(static_cast<size_t>(KB * NB));
  for (int64_t j0 = 0; j0 < N; j0 += NB) {
    const int64_t j1 = std::min(N, j0 + NB);
    const int64_t jt = j0 + (j1 - j0) / TW * TW;  // end of the full strips
    for (int64_t k0 = 0; k0 < K; k0 += KB) {
      const int64_t k1 = std::min(K, k0 + KB), kb = k1 - k0;
      for (int64_t j = j0; j < (M >= 4 ? jt : j0); j += TW)  // only the 4-row tiles read the pack
        for (int64_t k = k0; k < k1; ++k)
          std::memcpy(&pack[(j - j0) * kb + (k - k0) * TW], B + k * N + j, TW * sizeof(double));
      int64_t i = 0;
      for (; i + 4 <= M; i += 4) {
        const double* a0 = A + i * K + k0;
        const double* a1 = a0 + K;
        const double* a2 = a1 + K;
        const double* a3 = a2 + K;
        for (int64_t j = j0; j < jt; j += TW) {
          double* c = C + i * N + j;
          v4d c00, c01, c10, c11, c20, c21, c30, c31;
          TS_LOAD4(c00, c), TS_LOAD4(c01, c + 4);
          TS_LOAD4(c10, c + N), TS_LOAD4(c11, c + N + 4);
          TS_LOAD4(c20, c + 2 * N), TS_LOAD4(c21, c + 2 * N + 4);
          TS_LOAD4(c30, c + 3 * N), TS_LOAD4(c31, c + 3 * N + 4);
          const double* p = &pack[(j - j0) * kb];
          for (int64_t k = 0; k < kb; ++k, p += TW) {
            v4d b0, b1;
            TS_LOAD4(b0, p);
            TS_LOAD4(b1, p + 4);
            c00 += a0[k] * b0, c01 += a0[k] * b1;
            c10 += a1[k] * b0, c11 += a1[k] * b1;
            c20 += a2[k] * b0, c21 += a2[k] * b1;
            c30 += a3[k] * b0, c31 += a3[k] * b1;
          }
          TS_STORE4(c, c00), TS_STORE4(c + 4, c01);
          TS_STORE4(c + N, c10), TS_STORE4(c + N + 4, c11);
          TS_STORE4(c + 2 * N, c20), TS_STORE4(c + 2 * N + 4, c21);
          TS_STORE4(c + 3 * N, c30), TS_STORE4(c + 3 * N + 4, c31);
        }
        for (int64_t j = jt; j < j1; ++j)  // columns left of the last full strip
          for (int64_t r = 0; r < 4; ++r) {
            const double* ar = A + (i + r) * K;
            double s = C[(i + r) * N + j];
            for (int64_t k = k0; k < k1; ++k) s += ar[k] * B[k * N + j];
            C[(i + r) * N + j] = s;
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

#undef TS_LOAD4
#undef TS_STORE4

}  // namespace tessel::mathops
