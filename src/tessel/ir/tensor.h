// A concrete tensor: dtype, integer shape, and storage. Used for constants in
// the graph IR and for every value in the reference interpreter.
//
// Storage is shared between copies (copying a Tensor is cheap); mutable access
// through mutable_data()/mutable_strings() first makes the storage unique, so a
// Tensor behaves like a value. Layout is dense row-major, one element per item
// (see dtype.h for how each dtype is stored).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/ir/dtype.h"

namespace tessel {

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor; throws tessel::Error for negative dims or a size that
  // overflows or exceeds the allocation limit.
  Tensor(DType dtype, std::vector<int64_t> shape);
  static Tensor scalar_f32(float v);
  static Tensor scalar_i64(int64_t v);
  static Tensor from_i64(const std::vector<int64_t>& values);  // 1-D i64
  static Tensor from_f32(std::vector<int64_t> shape, const std::vector<float>& values);
  // A tensor over the caller's bytes (row-major, `dtype`'s storage size per
  // element), without a copy: what the Python package hands an executable
  // for a numpy array or a DLPack tensor. `owner` keeps the bytes alive as
  // long as any copy of the tensor. The bytes are never written: the first
  // mutable access copies them into storage of the tensor's own.
  static Tensor borrow(DType dtype, std::vector<int64_t> shape, const void* data, std::shared_ptr<const void> owner);

  bool defined() const { return dtype_ != DType::Undefined; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t dim(int i) const { return shape_.at(static_cast<size_t>(i)); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const;  // storage bytes (0 for strings)

  // Typed access to the storage. T must match dtype_storage_size (for f16/bf16
  // use uint16_t, for f8/f4/int4/int2/bool use uint8_t/int8_t).
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(borrowed_ ? borrowed_ : buf_ ? buf_->data() : nullptr);
  }
  template <class T>
  T* mutable_data() {
    make_unique();
    return reinterpret_cast<T*>(buf_ ? buf_->data() : nullptr);
  }
  // Whether the bytes are the caller's (Tensor::borrow).
  bool is_borrowed() const { return borrowed_ != nullptr; }
  const uint8_t* raw() const { return data<uint8_t>(); }
  uint8_t* mutable_raw() { return mutable_data<uint8_t>(); }

  const std::vector<std::string>& strings() const;
  std::vector<std::string>& mutable_strings();

  // Element access by flat index through double / int64 / uint64. Floats
  // convert with round-to-nearest-even (saturating to the target's rules for
  // float8: non-saturating, as ONNX arithmetic does); integers wrap to their
  // width; bool stores v != 0. Not for strings.
  double get_f64(int64_t i) const;
  void set_f64(int64_t i, double v);
  int64_t get_i64(int64_t i) const;
  void set_i64(int64_t i, int64_t v);
  uint64_t get_u64(int64_t i) const;
  void set_u64(int64_t i, uint64_t v);

  // Same data, new shape (numel must match).
  Tensor reshaped(std::vector<int64_t> shape) const;
  // Converts every element to another dtype (Cast semantics, saturate=true for
  // float8 as Cast's default).
  Tensor cast(DType to, bool saturate = true) const;

  // Exact equality of dtype, shape and bits (NaN payloads included).
  bool bitwise_equal(const Tensor& other) const;

  // Largest number of elements a single tensor may hold (a guard against
  // hostile shapes; 2^34 elements).
  static constexpr int64_t kMaxElements = int64_t{1} << 34;

 private:
  void make_unique();
  DType dtype_ = DType::Undefined;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::shared_ptr<std::vector<uint8_t>> buf_;
  const uint8_t* borrowed_ = nullptr;        // Tensor::borrow: the caller's bytes (buf_ unused)
  std::shared_ptr<const void> borrow_owner_;  // ... kept alive by this
  std::shared_ptr<std::vector<std::string>> strs_;
};

// Number of elements of a shape, checked (throws on negative or overflow).
int64_t checked_numel(const std::vector<int64_t>& shape);
// Truncates a double to int64 where a C cast would be undefined: NaN gives 0
// and out-of-range values clamp to INT64_MIN/INT64_MAX.
int64_t double_to_i64(double v);
// Row-major strides of a shape.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape);
std::string dims_str(const std::vector<int64_t>& shape);  // "[1,3,224,224]"

}  // namespace tessel
