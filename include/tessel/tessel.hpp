// tessel's C++ runtime API: a header-only layer over the C API
// (tessel/tessel.h), for programs that ship an artifact and link
// libtessel_runtime (find_package(tessel) -> tessel::runtime).
//
//   #include <tessel/tessel.hpp>
//   tessel::rt::Model m("model.tsl");                 // throws tessel::rt::Error
//   tessel::rt::Tensor x(TESSEL_F32, {1, 3, 224, 224});
//   std::vector<tessel::rt::Tensor> y = m.run({x});
//
// Model::run is const and may be called from several threads at once.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tessel/tessel.h"

namespace tessel::rt {

class Error : public std::runtime_error {
 public:
  Error(tessel_status s, const std::string& what) : std::runtime_error(what), status_(s) {}
  tessel_status status() const { return status_; }

 private:
  tessel_status status_;
};

inline void check(tessel_status s) {
  if (s != TESSEL_OK) throw Error(s, std::string(tessel_status_name(s)) + ": " + tessel_last_error());
}

// A dense row-major tensor that owns its bytes.
class Tensor {
 public:
  Tensor() = default;
  Tensor(tessel_dtype dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
    size_t n = tessel_dtype_size(dtype);
    for (int64_t d : shape_) n *= static_cast<size_t>(d);
    bytes_.resize(n);
  }
  tessel_dtype dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t nbytes() const { return bytes_.size(); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  template <class T>
  T* data_as() { return reinterpret_cast<T*>(bytes_.data()); }
  template <class T>
  const T* data_as() const { return reinterpret_cast<const T*>(bytes_.data()); }

  // The C view of this tensor (valid while the tensor is neither moved nor resized).
  tessel_tensor view() {
    return {dtype_, shape_.size(), shape_.data(), bytes_.data(), bytes_.size()};
  }

 private:
  tessel_dtype dtype_ = TESSEL_DTYPE_UNDEFINED;
  std::vector<int64_t> shape_;
  std::vector<unsigned char> bytes_;
};

struct ValueInfo {
  std::string name;
  tessel_dtype dtype = TESSEL_DTYPE_UNDEFINED;
  bool rank_known = false;
  std::vector<int64_t> dims;           // -1 where symbolic
  std::vector<std::string> dim_names;  // "" where fixed
};

class Model {
 public:
  explicit Model(const std::string& path, int threads = 0) {
    tessel_load_options o{sizeof(tessel_load_options), threads, TESSEL_DEVICE_CPU};
    check(tessel_load(path.c_str(), &o, &m_));
    for (size_t i = 0; i < tessel_num_inputs(m_); ++i) inputs_.push_back(info(i, true));
    for (size_t i = 0; i < tessel_num_outputs(m_); ++i) outputs_.push_back(info(i, false));
  }
  ~Model() { tessel_free(m_); }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  Model(Model&& o) noexcept : m_(std::exchange(o.m_, nullptr)), inputs_(std::move(o.inputs_)), outputs_(std::move(o.outputs_)) {}

  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }

  // Runs on tensors in the caller's memory (the C API's contract).
  void run(const std::vector<tessel_tensor>& in, std::vector<tessel_tensor>& out) const {
    check(tessel_run(m_, in.data(), in.size(), out.data(), out.size()));
  }

  // Runs on owning tensors; the outputs are allocated at the shapes the
  // inputs imply.
  std::vector<Tensor> run(std::vector<Tensor> in) const {
    std::vector<tessel_tensor> views;
    for (Tensor& t : in) views.push_back(t.view());
    std::vector<Tensor> results;
    std::vector<tessel_tensor> outs;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      int64_t shape[TESSEL_MAX_RANK];
      size_t rank = 0;
      check(tessel_output_shape(m_, views.data(), views.size(), i, shape, &rank));
      results.emplace_back(outputs_[i].dtype, std::vector<int64_t>(shape, shape + rank));
    }
    // Shapes are written back through these arrays (one per output).
    std::vector<std::vector<int64_t>> room(results.size(), std::vector<int64_t>(TESSEL_MAX_RANK));
    for (size_t i = 0; i < results.size(); ++i)
      outs.push_back({results[i].dtype(), 0, room[i].data(), results[i].data(), results[i].nbytes()});
    run(views, outs);
    return results;
  }

 private:
  ValueInfo info(size_t i, bool input) const {
    tessel_value_info v{};
    check(input ? tessel_input_info(m_, i, &v) : tessel_output_info(m_, i, &v));
    ValueInfo out;
    out.name = v.name;
    out.dtype = v.dtype;
    out.rank_known = v.rank >= 0;
    for (int64_t d = 0; d < v.rank; ++d) {
      out.dims.push_back(v.dims[d]);
      out.dim_names.push_back(v.dim_names && v.dim_names[d] ? v.dim_names[d] : "");
    }
    return out;
  }

  tessel_model* m_ = nullptr;
  std::vector<ValueInfo> inputs_, outputs_;
};

}  // namespace tessel::rt
