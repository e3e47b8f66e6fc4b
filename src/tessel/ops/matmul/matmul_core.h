// The inner matrix-product loop shared by MatMul, Gemm, MatMulInteger,
// QLinearMatMul and Einsum's reference kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace tessel::mathops {

// C[M,N] += A[M,K] * B[K,N] in double, all row-major and contiguous. Register
// blocked and vectorised (matmul_core.cpp), yet every C[i,j] is still summed
// as c += a*b over k in ascending order with a rounding after each multiply
// and add (no fused multiply-add), so the result is bit-identical to the
// plain triple loop.
void matmul_accumulate_f64(const double* A, const double* B, double* C, int64_t M, int64_t K, int64_t N);

// Same contract for any T (uint64_t for wrapping integer work): the i-k-j
// order, blocked so that a KB x NB panel of B stays in cache.
template <class T>
void matmul_accumulate(const T* A, const T* B, T* C, int64_t M, int64_t K, int64_t N) {
  if constexpr (std::is_same_v<T, double>) {
    matmul_accumulate_f64(A, B, C, M, K, N);
  } else {
    constexpr int64_t KB = 64, NB = 256;
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
      const int64_t nb = std::min(NB, N - j0);
      for (int64_t k0 = 0; k0 < K; k0 += KB) {
        const int64_t kb = std::min(KB, K - k0);
        for (int64_t i = 0; i < M; ++i) {
          T* crow = C + i * N + j0;
          const T* arow = A + i * K + k0;
          for (int64_t k = 0; k < kb; ++k) {
            const T a = arow[k];
            const T* brow = B + (k0 + k) * N + j0;
            for (int64_t j = 0; j < nb; ++j) crow[j] += a * brow[j];
          }
        }
      }
    }
  }
}

}  // namespace tessel::mathops
