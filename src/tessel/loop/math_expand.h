// Replaces Calls of transcendental intrinsics by branch-free loop IR: range
// reduction, a polynomial (Horner, fma), and selects for special values. No
// loops, no tables, so a Vectorized loop stays vectorisable (LLVM would
// otherwise scalarise llvm.exp.v16f32 into 16 libm calls). Shared
// subexpressions become Let statements placed right before the statement
// that uses them. Primitive intrinsics (sqrt, fabs, floor, ceil, trunc, rint,
// fma, copysign, isnan, isinf) stay calls; casts of NaN/out-of-range floats
// to integers follow the IR's saturating cast semantics.
//
// Types: f32 and f64 are computed natively except erf for f64 (through f32,
// ~1e-7 relative; to be done) and f32 pow (through f64 exp/log: 0.5 ulp).
// f16/bf16 are computed in f32 and rounded.
//
// Measured max error in ulps (dense sweeps against long double libm, see
// docs/loop_ir.md; tests/unit/loop_math_test.cpp asserts the bound in []):
//   f32: exp 0.91 [1], expm1 2.37 [3], log 0.73 [1], log1p 2.32 [3], sigmoid 2.40 [3], tanh 3.05 [4], erf
//        2.40 [3], sin 1.46 [2], cos 1.48 [2], tan 2.86 [3], atan 1.97 [2.5], asin 1.81 [2], acos 1.24 [2],
//        sinh 2.48 [3], cosh 2.32 [3], asinh 2.56 [3], acosh 2.37 [3], atanh 2.80 [3], pow 0.50 [1]
//   f64: exp 0.82 [1], expm1 2.37 [3], log 0.73 [1], log1p 2.25 [3], sigmoid 2.35 [3], tanh 2.99 [4], sin
//        1.46 [2], cos 1.43 [2], atan 2.19 [3], asin 2.00 [2.5], acos 1.13 [2], sinh 2.47 [3], cosh 1.26 [2],
//        asinh 2.47 [3], acosh 2.33 [3], atanh 2.94 [3.5], erf ~1e-7 relative (through f32), pow ~|y log x|
//        2^-53 relative
//   sin/cos/tan: the reduction holds to |x| <= 2^28 (f32) / 2^30 (f64), measured to 1e6 / 1e4;
//   beyond, results stay in [-1, 1].
// Special values: NaN in => NaN out; exp(-inf) = 0, exp(big) = inf,
// log(0) = -inf, log(<0) = NaN, tanh(+-inf) = +-1, sin(inf) = NaN, pow
// follows C pow (pow(x, 0) = 1, pow(1, y) = 1, negative base with an
// integer exponent, zeros and infinities).
#pragma once

#include <set>
#include <string>

#include "tessel/loop/ir.h"

namespace tessel::loop {

// Calls named in `native` stay calls (the target implements them); those of
// f16/bf16 operands become the f32 call between casts, as the expansions are.
Kernel expand_math(const Kernel& k, const std::set<std::string>& native = {});
// `taken` holds the names already used (fresh let names avoid them).
Stmt expand_math(const Stmt& s, const std::set<std::string>& taken, const std::set<std::string>& native = {});

}  // namespace tessel::loop
