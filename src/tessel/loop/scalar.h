// Scalar values and the exact semantics of every loop IR operator on them.
// The evaluator (eval.h) runs kernels with these, and the simplifier folds
// constants with them, so the two can never disagree.
//
//   integers: wrap at the type's width; Div truncates and Mod takes the
//     dividend's sign (C); FloorDiv/FloorMod round toward -inf; division by
//     zero and shifts by an amount outside [0, bits) throw tessel::Error
//     (they are undefined in the generated code);
//   f32 arithmetic is done in f32, f64 in f64, f16/bf16 in f32 and rounded
//     to the type after each operation; Min/Max propagate NaN and order
//     -0 < +0; comparisons are ordered (NaN: false; Ne: true);
//   Cast: the reference interpreter's Tensor::cast (through double).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/loop/ir.h"

namespace tessel::loop {

struct Scalar {
  DType type = DType::I64;
  int64_t i = 0;  // integers: wrapped (signed: sign-extended; unsigned: zero-extended; bool 0/1)
  double f = 0;   // floats: a value exactly representable in `type`

  static Scalar of_int(DType t, int64_t v);   // wraps v to t
  static Scalar of_float(DType t, double v);  // rounds v to t
  bool is_float() const { return tessel::is_float(type); }
  double as_double() const;  // value as a double (u64 as unsigned)
};

Scalar from_immediate(const Expr& imm);  // IntImm or FloatImm
Expr to_immediate(const Scalar& s);

Scalar apply_unary(UnaryOp op, const Scalar& a);
Scalar apply_binary(BinaryOp op, const Scalar& a, const Scalar& b);
Scalar apply_cast(DType to, const Scalar& a);
Scalar apply_bitcast(DType to, const Scalar& a);
// Intrinsics (intrinsics.h). Transcendental ones are computed in long double
// and rounded to the type, as a reference for math_expand's polynomials.
Scalar apply_intrinsic(const std::string& name, DType result, const std::vector<Scalar>& args);

// Memory representation: f16/bf16 as their 16-bit patterns, bool as a byte.
Scalar load_scalar(const void* base, DType t, int64_t index);
void store_scalar(void* base, const Scalar& v, int64_t index);

}  // namespace tessel::loop
