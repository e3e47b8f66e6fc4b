#include "tessel/ir/tensor.h"

#include <cmath>
#include <cstring>

#include "tessel/support/error.h"

namespace tessel {

int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    TS_CHECK(d >= 0, "negative dimension ", d, " in shape ", dims_str(shape));
    n = checked_mul(n, d);
  }
  return n;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

std::string dims_str(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  TS_CHECK(dtype != DType::Undefined, "tensor of undefined dtype");
  numel_ = checked_numel(shape_);
  TS_CHECK(numel_ <= kMaxElements, "tensor of shape ", dims_str(shape_), " is too large to allocate");
  if (dtype == DType::String) {
    strs_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(numel_));
  } else {
    buf_ = std::make_shared<std::vector<uint8_t>>(
        static_cast<size_t>(checked_mul(numel_, dtype_storage_size(dtype))));
  }
}

Tensor Tensor::scalar_f32(float v) {
  Tensor t(DType::F32, {});
  t.mutable_data<float>()[0] = v;
  return t;
}

Tensor Tensor::scalar_i64(int64_t v) {
  Tensor t(DType::I64, {});
  t.mutable_data<int64_t>()[0] = v;
  return t;
}

Tensor Tensor::from_i64(const std::vector<int64_t>& values) {
  Tensor t(DType::I64, {static_cast<int64_t>(values.size())});
  if (!values.empty()) std::memcpy(t.mutable_raw(), values.data(), values.size() * 8);
  return t;
}

Tensor Tensor::from_f32(std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor t(DType::F32, std::move(shape));
  TS_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "from_f32: value count does not match shape");
  if (!values.empty()) std::memcpy(t.mutable_raw(), values.data(), values.size() * 4);
  return t;
}

Tensor Tensor::borrow(DType dtype, std::vector<int64_t> shape, const void* data, std::shared_ptr<const void> owner) {
  TS_CHECK(dtype != DType::Undefined && dtype != DType::String, "cannot borrow the bytes of a ", dtype_name(dtype),
           " tensor");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = checked_numel(t.shape_);
  TS_CHECK(t.numel_ <= kMaxElements, "tensor of shape ", dims_str(t.shape_), " is too large");
  TS_CHECK(data || t.numel_ == 0, "borrowed tensor without data");
  static const uint8_t kEmpty = 0;  // buf_ stays empty until a write copies the borrowed bytes in
  t.borrowed_ = data ? static_cast<const uint8_t*>(data) : &kEmpty;
  t.borrow_owner_ = std::move(owner);
  return t;
}

size_t Tensor::nbytes() const {
  if (borrowed_) return static_cast<size_t>(checked_mul(numel_, dtype_storage_size(dtype_)));
  return buf_ ? buf_->size() : 0;
}

void Tensor::make_unique() {
  if (borrowed_) {
    buf_ = std::make_shared<std::vector<uint8_t>>(borrowed_, borrowed_ + nbytes());
    borrowed_ = nullptr;
    borrow_owner_.reset();
    return;
  }
  if (buf_ && buf_.use_count() > 1) buf_ = std::make_shared<std::vector<uint8_t>>(*buf_);
  if (strs_ && strs_.use_count() > 1) strs_ = std::make_shared<std::vector<std::string>>(*strs_);
}

const std::vector<std::string>& Tensor::strings() const {
  TS_CHECK(dtype_ == DType::String && strs_, "strings() on a ", dtype_name(dtype_), " tensor");
  return *strs_;
}

std::vector<std::string>& Tensor::mutable_strings() {
  TS_CHECK(dtype_ == DType::String && strs_, "mutable_strings() on a ", dtype_name(dtype_), " tensor");
  make_unique();
  return *strs_;
}

namespace {
template <class T>
T load(const uint8_t* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <class T>
void store(uint8_t* p, int64_t i, T v) {
  std::memcpy(p + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

// Wraps v to a signed/unsigned sub-byte integer stored in one byte.
uint8_t wrap_bits(int64_t v, int bits, bool is_signed) {
  uint8_t u = static_cast<uint8_t>(v) & static_cast<uint8_t>((1u << bits) - 1);
  if (is_signed && (u & (1u << (bits - 1)))) u |= static_cast<uint8_t>(~((1u << bits) - 1));
  return u;
}

}  // namespace

int64_t double_to_i64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

double Tensor::get_f64(int64_t i) const {
  const uint8_t* p = raw();
  switch (dtype_) {
    case DType::F32: return load<float>(p, i);
    case DType::F64: return load<double>(p, i);
    case DType::F16: return f16_bits_to_f32(load<uint16_t>(p, i));
    case DType::BF16: return bf16_bits_to_f32(load<uint16_t>(p, i));
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: case DType::F8E5M2:
    case DType::F8E5M2FNUZ: case DType::F8E8M0:
      return f8_bits_to_double(dtype_, p[i]);
    case DType::F4E2M1: return f4e2m1_bits_to_double(p[i]);
    case DType::U64: return static_cast<double>(load<uint64_t>(p, i));
    case DType::String: case DType::Undefined: fail("numeric access to a ", dtype_name(dtype_), " tensor");
    default: return static_cast<double>(get_i64(i));
  }
}

void Tensor::set_f64(int64_t i, double v) {
  uint8_t* p = mutable_raw();
  switch (dtype_) {
    case DType::F32: store<float>(p, i, static_cast<float>(v)); return;
    case DType::F64: store<double>(p, i, v); return;
    case DType::F16: store<uint16_t>(p, i, f32_to_f16_bits(static_cast<float>(v))); return;
    case DType::BF16: store<uint16_t>(p, i, f32_to_bf16_bits(static_cast<float>(v))); return;
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: case DType::F8E5M2:
    case DType::F8E5M2FNUZ: case DType::F8E8M0:
      p[i] = double_to_f8_bits(dtype_, v, false); return;
    case DType::F4E2M1: p[i] = double_to_f4e2m1_bits(v); return;
    case DType::Bool: p[i] = v != 0 ? 1 : 0; return;
    case DType::U64:
      store<uint64_t>(p, i, std::isnan(v) || v <= 0 ? 0 : v >= 1.8446744073709552e19 ? UINT64_MAX : static_cast<uint64_t>(v));
      return;
    case DType::String: case DType::Undefined: fail("numeric access to a ", dtype_name(dtype_), " tensor");
    default: set_i64(i, double_to_i64(v)); return;
  }
}

int64_t Tensor::get_i64(int64_t i) const {
  const uint8_t* p = raw();
  switch (dtype_) {
    case DType::I8: case DType::I4: case DType::I2: return static_cast<int8_t>(p[i]);
    case DType::U8: case DType::U4: case DType::U2: case DType::Bool: return p[i];
    case DType::I16: return load<int16_t>(p, i);
    case DType::U16: return load<uint16_t>(p, i);
    case DType::I32: return load<int32_t>(p, i);
    case DType::U32: return load<uint32_t>(p, i);
    case DType::I64: return load<int64_t>(p, i);
    case DType::U64: return static_cast<int64_t>(load<uint64_t>(p, i));
    case DType::String: case DType::Undefined: fail("numeric access to a ", dtype_name(dtype_), " tensor");
    default: return double_to_i64(get_f64(i));
  }
}

void Tensor::set_i64(int64_t i, int64_t v) {
  uint8_t* p = mutable_raw();
  switch (dtype_) {
    case DType::I8: case DType::U8: p[i] = static_cast<uint8_t>(v); return;
    case DType::I4: p[i] = wrap_bits(v, 4, true); return;
    case DType::U4: p[i] = wrap_bits(v, 4, false); return;
    case DType::I2: p[i] = wrap_bits(v, 2, true); return;
    case DType::U2: p[i] = wrap_bits(v, 2, false); return;
    case DType::Bool: p[i] = v != 0 ? 1 : 0; return;
    case DType::I16: case DType::U16: store<uint16_t>(p, i, static_cast<uint16_t>(v)); return;
    case DType::I32: case DType::U32: store<uint32_t>(p, i, static_cast<uint32_t>(v)); return;
    case DType::I64: case DType::U64: store<int64_t>(p, i, v); return;
    case DType::String: case DType::Undefined: fail("numeric access to a ", dtype_name(dtype_), " tensor");
    default: set_f64(i, static_cast<double>(v)); return;
  }
}

uint64_t Tensor::get_u64(int64_t i) const {
  if (dtype_ == DType::U64) return load<uint64_t>(raw(), i);
  return static_cast<uint64_t>(get_i64(i));
}

void Tensor::set_u64(int64_t i, uint64_t v) {
  if (dtype_ == DType::U64) {
    store<uint64_t>(mutable_raw(), i, v);
    return;
  }
  if (is_float(dtype_)) {
    set_f64(i, static_cast<double>(v));
    return;
  }
  set_i64(i, static_cast<int64_t>(v));
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  TS_CHECK(checked_numel(shape) == numel_, "cannot reshape ", dims_str(shape_), " to ", dims_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::cast(DType to, bool saturate) const {
  Tensor out(to, shape_);
  if (to == dtype_) return *this;
  TS_CHECK(dtype_ != DType::String && to != DType::String, "Tensor::cast does not convert strings");
  out.make_unique();
  const bool f8 = to == DType::F8E4M3FN || to == DType::F8E4M3FNUZ || to == DType::F8E5M2 ||
                  to == DType::F8E5M2FNUZ || to == DType::F8E8M0;
  for (int64_t i = 0; i < numel_; ++i) {
    if (f8) {
      out.buf_->data()[i] = double_to_f8_bits(to, get_f64(i), saturate);
    } else if (is_float(to) || is_float(dtype_)) {
      out.set_f64(i, get_f64(i));
    } else if (dtype_ == DType::U64) {
      out.set_u64(i, get_u64(i));
    } else {
      out.set_i64(i, get_i64(i));
    }
  }
  return out;
}

bool Tensor::bitwise_equal(const Tensor& o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_) return false;
  if (dtype_ == DType::String) return strings() == o.strings();
  return nbytes() == o.nbytes() && (nbytes() == 0 || std::memcmp(raw(), o.raw(), nbytes()) == 0);
}

}  // namespace tessel
