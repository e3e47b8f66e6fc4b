// The canonical structural hash of a kernel: the one key that kernel
// deduplication, the CPU object cache and the tuning database use for "the
// same kernel" (docs/loop_ir.md, "Structural hash").
//
// It is computed from the IR itself, not from its text, and it ignores the
// names that do not change what a kernel does: the kernel's own name and
// those of its buffers, loop, let and contract/attention variables. Those are
// numbered in order of definition instead (params by position), so kernels
// that differ only by a consistent renaming hash equal. Everything else
// counts: every node kind, operator, dtype, constant (floats bitwise),
// buffer shape, scope and input/output role, loop bounds and kinds
// (parallel, vectorized, unrolled, GPU axes), intrinsic names, assert
// messages (the error a failing kernel reports) and the names of the syms:
// the runtimes bind syms by name (a CUDA launch's grid is an expression
// over them), so they are part of the kernel's interface.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "tessel/loop/ir.h"

namespace tessel::loop {

struct StructuralHash {
  uint64_t hi = 0, lo = 0;
  std::string hex() const;  // 32 lowercase hex digits, hi first
  auto operator<=>(const StructuralHash&) const = default;
};

// 128 bits of the SHA-256 of the kernel's canonical encoding.
StructuralHash structural_hash(const Kernel& k);

// Whether the canonical encodings are equal: what structural_hash promises
// equal kernels agree on, without trusting the hash (a collision never
// merges two kernels).
bool structurally_equal(const Kernel& a, const Kernel& b);

// What both are computed from: a byte string, equal for two kernels exactly
// when they are structurally equal. For a caller that compares each of
// many kernels with the others (kernel sharing), so that each is encoded
// once: walking a kernel's IR costs about as much as printing it.
std::string canonical_encoding(const Kernel& k);

}  // namespace tessel::loop
