// The inner matrix-product loop shared by MatMul, Gemm, MatMulInteger,
// QLinearMatMul and Einsum's reference kernels.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tessel::mathops {

// C[M,N] += A[M,K] * B[K,N], all row-major and contiguous. T is double for
// float work and uint64_t (wrapping) or int64_t for integer work.
//
// Every C[i,j] is summed over k in ascending order (the result does not depend
// on the blocking). The loops are blocked so that a KB x NB panel of B stays
// in cache while all rows of A stream past it, with the innermost loop running
// along contiguous rows of B and C (the i-k-j order).
template <class T>
void matmul_accumulate(const T* A, const T* B, T* C, int64_t M, int64_t K, int64_t N) {
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

}  // namespace tessel::mathops
