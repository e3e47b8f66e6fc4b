// NumPy .npy files: the input and output format of `tessel run`.
//
// Writing uses format version 1.0, little-endian, C order. Dtypes NumPy has
// natively keep their NumPy type ('<f4', '<i8', '|b1', '<f2', ...); strings
// are written as '<U' arrays (UTF-32). Dtypes NumPy lacks are written as raw
// 'V' items laid out as the ml_dtypes package lays them out: bf16 '|V2',
// every float8, float4, int4 and int2 type '|V1' (one element per byte,
// unpacked, the value in the low bits and the high bits zero: int4 -1 is
// 0x0F, unlike tessel's sign-extended storage).
//
// Reading accepts versions 1.0-3.0, either byte order, Fortran order, and
// '|S' byte strings. A 'V' array carries no type of its own: the caller says
// which dtype it holds (the model's declared input dtype).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessel/ir/tensor.h"

namespace tessel {

// The NumPy descr a tensor of this dtype is written with ("<f4", "|V2", ...;
// strings: "<U" without the length).
std::string npy_descr_for(DType t);

// Serialises a tensor into .npy bytes.
std::vector<uint8_t> npy_encode(const Tensor& t);
// Writes `t` to `path` (replacing it). Throws tessel::Error on I/O failure.
void write_npy_file(const std::string& path, const Tensor& t);

// Parses .npy bytes. `want` is the dtype the caller expects (Undefined = take
// the file's). A NumPy dtype must equal `want` exactly; a 'V' array must have
// the storage size of `want` and its values must be valid for it. Throws
// tessel::Error with a clear message on any problem (truncated data, bad
// header, unsupported dtype, dtype mismatch).
Tensor npy_decode(const uint8_t* data, size_t size, DType want = DType::Undefined);
Tensor read_npy_file(const std::string& path, DType want = DType::Undefined);

}  // namespace tessel
