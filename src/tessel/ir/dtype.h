// Element types. The numbering equals ONNX's TensorProto.DataType so that the
// importer and the artifact format can store them directly.
//
// Storage in tessel::Tensor is one element per item, unpacked: f16/bf16 as
// their 16-bit patterns, every float8/e8m0/float4/int4/int2 type as one byte
// (sub-byte types in the low bits, signed ones sign-extended), bool as one
// byte (0 or 1), strings in a separate std::vector<std::string>.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessel {

enum class DType : uint8_t {
  Undefined = 0,
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  String = 8,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  U32 = 12,
  U64 = 13,
  // 14, 15: complex64/complex128 are rejected by the importer.
  BF16 = 16,
  F8E4M3FN = 17,
  F8E4M3FNUZ = 18,
  F8E5M2 = 19,
  F8E5M2FNUZ = 20,
  U4 = 21,
  I4 = 22,
  F4E2M1 = 23,
  F8E8M0 = 24,
  U2 = 25,
  I2 = 26,
};

// Short name used by the IR text form: f32, i64, bf16, f8e4m3fn, u4, bool, str...
std::string_view dtype_name(DType t);
// Inverse of dtype_name; returns false for an unknown name.
bool dtype_from_name(std::string_view name, DType* out);
// True when `code` is an ONNX data type tessel supports.
bool dtype_from_onnx(int code, DType* out);

// Bytes per element in tessel::Tensor storage (strings: 0).
int dtype_storage_size(DType t);
bool is_float(DType t);      // every floating type incl. f8, f4, e8m0
bool is_signed_int(DType t); // i2..i64
bool is_unsigned_int(DType t);  // u2..u64 (not bool)
inline bool is_int(DType t) { return is_signed_int(t) || is_unsigned_int(t); }
// Number of value bits of an integer type (2, 4, 8, 16, 32, 64).
int int_bits(DType t);

// Scalar conversions between double and the stored bit patterns. `saturate`
// follows ONNX Cast-19: out-of-range finite values clamp to the largest finite
// value instead of becoming inf/NaN (only meaningful for float8 types).
uint16_t f32_to_f16_bits(float v);
float f16_bits_to_f32(uint16_t b);
uint16_t f32_to_bf16_bits(float v);
float bf16_bits_to_f32(uint16_t b);
uint8_t double_to_f8_bits(DType t, double v, bool saturate);
double f8_bits_to_double(DType t, uint8_t b);
uint8_t double_to_f4e2m1_bits(double v);
double f4e2m1_bits_to_double(uint8_t b);

}  // namespace tessel
