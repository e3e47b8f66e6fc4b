// TensorProto / SparseTensorProto / TypeProto decoding.
//
// Sizes are validated against the data actually present before any storage
// is allocated, so a hostile tensor that declares huge dims without data
// costs nothing.
#include <bit>
#include <cstring>

#include "tessel/frontend/onnx/onnx_internal.h"
#include "tessel/support/error.h"

static_assert(std::endian::native == std::endian::little, "the ONNX importer assumes a little-endian host");

namespace tessel::onnx_import {
namespace {

// Elements per byte in the packed ONNX form (raw_data and int32_data).
int pack_factor(DType t) {
  switch (t) {
    case DType::U4:
    case DType::I4:
    case DType::F4E2M1:
      return 2;
    case DType::U2:
    case DType::I2:
      return 4;
    default:
      return 1;
  }
}

// Bytes of the serialized (packed) form of `numel` elements.
int64_t packed_bytes(DType t, int64_t numel) {
  int pf = pack_factor(t);
  if (pf > 1) return numel / pf + (numel % pf ? 1 : 0);
  return checked_mul(numel, dtype_storage_size(t));
}

// Unpacks sub-byte elements (low bits first), sign-extending signed types.
void unpack_sub_byte(DType t, const uint8_t* src, int64_t numel, uint8_t* dst) {
  const int pf = pack_factor(t);
  const int bits = 8 / pf;
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  const bool sign = t == DType::I4 || t == DType::I2;
  for (int64_t i = 0; i < numel; ++i) {
    uint8_t v = static_cast<uint8_t>((src[i / pf] >> ((i % pf) * bits)) & mask);
    if (sign && (v >> (bits - 1))) v = static_cast<uint8_t>(v | ~mask);
    dst[i] = v;
  }
}

DType tensor_dtype(int32_t code, const std::string& what) {
  TS_CHECK(code != 14 && code != 15, what, ": complex tensors (", code == 14 ? "complex64" : "complex128",
           ") are not supported");
  TS_CHECK(code != 0, what, ": tensor has no data type");
  DType dt;
  TS_CHECK(code > 0 && code <= 255 && dtype_from_onnx(code, &dt), what, ": unsupported tensor data type ", code);
  return dt;
}

// Fills `t` from packed little-endian bytes of the ONNX serialized form.
void fill_from_bytes(Tensor& t, const uint8_t* src, size_t n, const std::string& what) {
  const int64_t numel = t.numel();
  const int64_t need = packed_bytes(t.dtype(), numel);
  TS_CHECK(static_cast<uint64_t>(need) == n, what, ": has ", n, " bytes of data but its shape ", dims_str(t.shape()),
           " of ", dtype_name(t.dtype()), " needs ", need);
  if (numel == 0) return;
  if (pack_factor(t.dtype()) > 1) {
    unpack_sub_byte(t.dtype(), src, numel, t.mutable_raw());
  } else if (t.dtype() == DType::Bool) {
    uint8_t* d = t.mutable_raw();
    for (int64_t i = 0; i < numel; ++i) d[i] = src[i] != 0;
  } else {
    std::memcpy(t.mutable_raw(), src, n);
  }
}

template <class Field>
void check_count(const Field& f, int64_t expect, const Tensor& t, const char* field, const std::string& what) {
  TS_CHECK(static_cast<int64_t>(f.size()) == expect, what, ": has ", f.size(), " values in ", field,
           " but its shape ", dims_str(t.shape()), " of ", dtype_name(t.dtype()), " needs ", expect);
}

// Which typed field carries data of a dtype.
const char* typed_field_name(DType dt) {
  switch (dt) {
    case DType::F32: return "float_data";
    case DType::F64: return "double_data";
    case DType::I64: return "int64_data";
    case DType::U32:
    case DType::U64: return "uint64_data";
    case DType::String: return "string_data";
    default: return "int32_data";
  }
}

// Data in a field that does not belong to the dtype is a malformed tensor.
void check_no_foreign_field(DType dt, const onnx::TensorProto& tp, const std::string& what) {
  const std::string want = typed_field_name(dt);
  auto no_other = [&](int size, const char* name) {
    TS_CHECK(size == 0 || want == name, what, ": ", dtype_name(dt), " tensor has data in ", name);
  };
  no_other(tp.float_data_size(), "float_data");
  no_other(tp.double_data_size(), "double_data");
  no_other(tp.int64_data_size(), "int64_data");
  no_other(tp.uint64_data_size(), "uint64_data");
  no_other(tp.string_data_size(), "string_data");
  no_other(tp.int32_data_size(), "int32_data");
}

void fill_from_typed(Tensor& t, const onnx::TensorProto& tp, const std::string& what) {
  const DType dt = t.dtype();
  const int64_t n = t.numel();
  switch (dt) {
    case DType::F32:
      check_count(tp.float_data(), n, t, "float_data", what);
      if (n) std::memcpy(t.mutable_raw(), tp.float_data().data(), static_cast<size_t>(n) * 4);
      return;
    case DType::F64:
      check_count(tp.double_data(), n, t, "double_data", what);
      if (n) std::memcpy(t.mutable_raw(), tp.double_data().data(), static_cast<size_t>(n) * 8);
      return;
    case DType::I64:
      check_count(tp.int64_data(), n, t, "int64_data", what);
      if (n) std::memcpy(t.mutable_raw(), tp.int64_data().data(), static_cast<size_t>(n) * 8);
      return;
    case DType::U64:
      check_count(tp.uint64_data(), n, t, "uint64_data", what);
      if (n) std::memcpy(t.mutable_raw(), tp.uint64_data().data(), static_cast<size_t>(n) * 8);
      return;
    case DType::U32: {
      check_count(tp.uint64_data(), n, t, "uint64_data", what);
      uint32_t* d = t.mutable_data<uint32_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint32_t>(tp.uint64_data(static_cast<int>(i)));
      return;
    }
    case DType::String: {
      check_count(tp.string_data(), n, t, "string_data", what);
      auto& s = t.mutable_strings();
      for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = tp.string_data(static_cast<int>(i));
      return;
    }
    case DType::I32: {
      check_count(tp.int32_data(), n, t, "int32_data", what);
      if (n) std::memcpy(t.mutable_raw(), tp.int32_data().data(), static_cast<size_t>(n) * 4);
      return;
    }
    case DType::I16:
    case DType::U16:
    case DType::F16:
    case DType::BF16: {
      check_count(tp.int32_data(), n, t, "int32_data", what);
      uint16_t* d = t.mutable_data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint16_t>(tp.int32_data(static_cast<int>(i)));
      return;
    }
    case DType::Bool: {
      check_count(tp.int32_data(), n, t, "int32_data", what);
      uint8_t* d = t.mutable_raw();
      for (int64_t i = 0; i < n; ++i) d[i] = tp.int32_data(static_cast<int>(i)) != 0;
      return;
    }
    case DType::I8:
    case DType::U8:
    case DType::F8E4M3FN:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2:
    case DType::F8E5M2FNUZ:
    case DType::F8E8M0: {
      check_count(tp.int32_data(), n, t, "int32_data", what);
      uint8_t* d = t.mutable_raw();
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(tp.int32_data(static_cast<int>(i)));
      return;
    }
    case DType::U4:
    case DType::I4:
    case DType::F4E2M1:
    case DType::U2:
    case DType::I2: {
      // One packed byte per int32 entry, as onnx.helper.make_tensor writes.
      const int64_t nb = packed_bytes(dt, n);
      check_count(tp.int32_data(), nb, t, "int32_data", what);
      std::vector<uint8_t> bytes(static_cast<size_t>(nb));
      for (int64_t i = 0; i < nb; ++i) bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(tp.int32_data(static_cast<int>(i)));
      if (n) unpack_sub_byte(dt, bytes.data(), n, t.mutable_raw());
      return;
    }
    case DType::Undefined:
      break;
  }
  fail(what, ": unsupported tensor data type");
}

}  // namespace

Tensor decode_tensor(const onnx::TensorProto& tp, const ExternalDataContext& ext, const std::string& what) {
  const DType dt = tensor_dtype(tp.data_type(), what);
  std::vector<int64_t> dims(tp.dims().begin(), tp.dims().end());
  for (int64_t d : dims) TS_CHECK(d >= 0, what, ": negative dimension ", d, " in shape ", dims_str(dims));
  const int64_t numel = checked_numel(dims);  // throws on overflow
  TS_CHECK(numel <= Tensor::kMaxElements, what, ": shape ", dims_str(dims), " is too large (", numel,
           " elements; the limit is ", Tensor::kMaxElements, ")");
  TS_CHECK(!tp.has_segment(), what, ": segmented tensors are not supported");

  const bool external = tp.has_data_location() && tp.data_location() == onnx::TensorProto::EXTERNAL;
  if (external) {
    TS_CHECK(dt != DType::String, what, ": string tensors cannot use external data");
    ExternalRef ref = parse_external_ref(tp, what);
    const int64_t need = packed_bytes(dt, numel);
    if (ref.length >= 0)
      TS_CHECK(ref.length == need, what, ": external data length ", ref.length, " but its shape ", dims_str(dims),
               " of ", dtype_name(dt), " needs ", need, " bytes");
    std::vector<uint8_t> bytes = read_external(ext, ref, need, what);
    Tensor t(dt, dims);
    fill_from_bytes(t, bytes.data(), bytes.size(), what);
    return t;
  }
  TS_CHECK(!tp.has_data_location() || tp.data_location() == onnx::TensorProto::DEFAULT, what,
           ": unknown data_location ", static_cast<int>(tp.data_location()));
  if (tp.has_raw_data()) {
    TS_CHECK(dt != DType::String, what, ": string tensors cannot use raw_data");
    const std::string& raw = tp.raw_data();
    const int64_t need = packed_bytes(dt, numel);
    // Check before allocating: a huge shape with little data must not allocate.
    TS_CHECK(static_cast<uint64_t>(need) == raw.size(), what, ": raw_data has ", raw.size(),
             " bytes but its shape ", dims_str(dims), " of ", dtype_name(dt), " needs ", need);
    Tensor t(dt, dims);
    fill_from_bytes(t, reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), what);
    return t;
  }
  // Typed fields: compare the count before allocating too.
  check_no_foreign_field(dt, tp, what);
  int64_t have = 0;
  switch (dt) {
    case DType::F32: have = tp.float_data_size(); break;
    case DType::F64: have = tp.double_data_size(); break;
    case DType::I64: have = tp.int64_data_size(); break;
    case DType::U32:
    case DType::U64: have = tp.uint64_data_size(); break;
    case DType::String: have = tp.string_data_size(); break;
    default: have = tp.int32_data_size(); break;
  }
  const int64_t need = pack_factor(dt) > 1 ? packed_bytes(dt, numel) : numel;
  TS_CHECK(have == need, what, ": has ", have, " values in ", typed_field_name(dt), " but its shape ", dims_str(dims),
           " of ", dtype_name(dt), " needs ", need);
  Tensor t(dt, dims);
  fill_from_typed(t, tp, what);
  return t;
}

Tensor decode_sparse_tensor(const onnx::SparseTensorProto& sp, const ExternalDataContext& ext,
                            const std::string& what) {
  TS_CHECK(sp.has_values(), what, ": sparse tensor has no values");
  std::vector<int64_t> dims(sp.dims().begin(), sp.dims().end());
  for (int64_t d : dims) TS_CHECK(d >= 0, what, ": negative dimension ", d, " in sparse shape ", dims_str(dims));
  const int64_t numel = checked_numel(dims);
  Tensor values = decode_tensor(sp.values(), ext, what + " (values)");
  TS_CHECK(values.rank() == 1, what, ": sparse values must be 1-D, got shape ", dims_str(values.shape()));
  const int64_t nnz = values.numel();
  // Densifying allocates memory that the file does not pay for: cap it.
  constexpr int64_t kMaxDenseBytes = int64_t{256} << 20;
  const int64_t esize = values.dtype() == DType::String ? 32 : dtype_storage_size(values.dtype());
  TS_CHECK(numel <= Tensor::kMaxElements && checked_mul(numel, esize) <= kMaxDenseBytes, what,
           ": sparse tensor of shape ", dims_str(dims), " is too large to densify (limit ", kMaxDenseBytes, " bytes)");
  std::vector<int64_t> flat(static_cast<size_t>(nnz), 0);
  if (nnz > 0) {
    TS_CHECK(sp.has_indices(), what, ": sparse tensor has values but no indices");
    Tensor idx = decode_tensor(sp.indices(), ext, what + " (indices)");
    TS_CHECK(idx.dtype() == DType::I64, what, ": sparse indices must be int64");
    const std::vector<int64_t> strides = strides_of(dims);
    const int64_t* ip = idx.data<int64_t>();
    if (idx.rank() == 1) {
      TS_CHECK(idx.dim(0) == nnz, what, ": ", idx.dim(0), " sparse indices for ", nnz, " values");
      for (int64_t k = 0; k < nnz; ++k) {
        TS_CHECK(ip[k] >= 0 && ip[k] < numel, what, ": sparse index ", ip[k], " out of range for shape ",
                 dims_str(dims));
        flat[static_cast<size_t>(k)] = ip[k];
      }
    } else {
      TS_CHECK(idx.rank() == 2 && idx.dim(0) == nnz && idx.dim(1) == static_cast<int64_t>(dims.size()), what,
               ": sparse indices of shape ", dims_str(idx.shape()), " do not match ", nnz, " values of rank ",
               dims.size());
      for (int64_t k = 0; k < nnz; ++k) {
        int64_t off = 0;
        for (size_t a = 0; a < dims.size(); ++a) {
          int64_t c = ip[k * static_cast<int64_t>(dims.size()) + static_cast<int64_t>(a)];
          TS_CHECK(c >= 0 && c < dims[a], what, ": sparse index ", c, " out of range for dim ", a, " of shape ",
                   dims_str(dims));
          off += c * strides[a];
        }
        flat[static_cast<size_t>(k)] = off;
      }
    }
  }
  Tensor dense(values.dtype(), dims);
  if (values.dtype() == DType::String) {
    auto& s = dense.mutable_strings();
    for (int64_t k = 0; k < nnz; ++k) s[static_cast<size_t>(flat[static_cast<size_t>(k)])] = values.strings()[static_cast<size_t>(k)];
  } else {
    const size_t es = static_cast<size_t>(dtype_storage_size(values.dtype()));
    uint8_t* d = dense.mutable_raw();
    for (int64_t k = 0; k < nnz; ++k)
      std::memcpy(d + static_cast<size_t>(flat[static_cast<size_t>(k)]) * es, values.raw() + static_cast<size_t>(k) * es, es);
  }
  return dense;
}

Dim SymbolNamer::fresh() {
  for (;;) {
    std::string n = "unk__" + std::to_string(next_++);
    if (taken.insert(n).second) return Dim::sym(n);
  }
}

Type decode_type(const onnx::TypeProto& tp, SymbolNamer& namer, const std::string& what) {
  switch (tp.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const auto& tt = tp.tensor_type();
      DType dt = DType::Undefined;
      if (tt.elem_type() != 0) dt = tensor_dtype(tt.elem_type(), what);
      if (!tt.has_shape()) return Type::tensor_unknown_shape(dt);
      Shape s;
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) {
          TS_CHECK(d.dim_value() >= 0, what, ": negative dimension ", d.dim_value());
          s.push_back(Dim(d.dim_value()));
        } else if (d.has_dim_param() && !d.dim_param().empty()) {
          s.push_back(Dim::sym(d.dim_param()));
        } else {
          s.push_back(namer.fresh());
        }
      }
      return Type::tensor(dt, std::move(s));
    }
    case onnx::TypeProto::kSequenceType:
      TS_CHECK(tp.sequence_type().has_elem_type(), what, ": sequence type without element type");
      return Type::sequence(decode_type(tp.sequence_type().elem_type(), namer, what));
    case onnx::TypeProto::kOptionalType:
      TS_CHECK(tp.optional_type().has_elem_type(), what, ": optional type without element type");
      return Type::optional(decode_type(tp.optional_type().elem_type(), namer, what));
    case onnx::TypeProto::kMapType:
      fail(what, ": map types are not supported");
    case onnx::TypeProto::kSparseTensorType:
      fail(what, ": sparse tensor types are not supported");
    case onnx::TypeProto::VALUE_NOT_SET:
      break;
  }
  fail(what, ": missing type");
}

}  // namespace tessel::onnx_import
