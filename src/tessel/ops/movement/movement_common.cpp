#include "tessel/ops/movement/movement_common.h"

#include <cstring>
#include <string>

#include "tessel/support/error.h"

namespace tessel::movement {

void add_op(OpRegistry& r, const OpDef& d) {
  OpSchema s;
  s.name = d.name;
  s.min_inputs = d.min_inputs;
  s.max_inputs = d.max_inputs;
  s.min_outputs = d.min_outputs;
  s.max_outputs = d.max_outputs;
  s.infer = d.infer;
  s.kernel = d.kernel;
  s.upgrade = d.upgrade;
  s.since_version = d.since_version;
  r.add(std::move(s));
}

// ---- element copies ---------------------------------------------------------

void copy_elems(const Tensor& src, int64_t si, Tensor& dst, int64_t di, int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DType::String) {
    const auto& s = src.strings();
    auto& d = dst.mutable_strings();
    std::copy(s.begin() + si, s.begin() + si + n, d.begin() + di);
    return;
  }
  const int64_t es = dtype_storage_size(src.dtype());
  std::memcpy(dst.mutable_raw() + di * es, src.raw() + si * es, static_cast<size_t>(n * es));
}

namespace {

// The loop of copy_box for one element type. The innermost axis is the hot
// loop; outer axes advance like an odometer, keeping the running offsets.
template <class T>
void copy_box_t(const T* src, const AxisTables& st, T* dst, const AxisTables& dt, const std::vector<int64_t>& shape) {
  const size_t r = shape.size();
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  for (int64_t s : shape)
    if (s == 0) return;
  const int64_t inner = shape[r - 1];
  const int64_t* sl = st[r - 1].data();
  const int64_t* dl = dt[r - 1].data();
  // Contiguous innermost runs on both sides turn into block copies.
  bool src_run = true, dst_run = true;
  for (int64_t j = 1; j < inner; ++j) {
    src_run = src_run && sl[j] == sl[0] + j;
    dst_run = dst_run && dl[j] == dl[0] + j;
  }
  std::vector<int64_t> idx(r - 1, 0);
  int64_t sb = 0, db = 0;
  for (size_t d = 0; d + 1 < r; ++d) {
    sb += st[d][0];
    db += dt[d][0];
  }
  while (true) {
    if (src_run && dst_run) {
      std::copy(src + sb + sl[0], src + sb + sl[0] + inner, dst + db + dl[0]);
    } else {
      for (int64_t j = 0; j < inner; ++j) dst[db + dl[j]] = src[sb + sl[j]];
    }
    size_t d = r - 1;
    while (d-- > 0) {
      sb -= st[d][idx[d]];
      db -= dt[d][idx[d]];
      if (++idx[d] < shape[d]) {
        sb += st[d][idx[d]];
        db += dt[d][idx[d]];
        break;
      }
      idx[d] = 0;
      sb += st[d][0];
      db += dt[d][0];
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

}  // namespace

void copy_box(const Tensor& src, const AxisTables& src_tab, Tensor& dst, const AxisTables& dst_tab,
              const std::vector<int64_t>& shape) {
  TS_CHECK(src.dtype() == dst.dtype(), "copy_box: dtype mismatch");
  TS_CHECK(src_tab.size() == shape.size(), "copy_box: table rank mismatch");
  AxisTables contiguous;
  const AxisTables* dt = &dst_tab;
  if (dst_tab.empty()) {
    contiguous = box_tables(shape, std::vector<int64_t>(shape.size(), 0), shape);
    dt = &contiguous;
  }
  if (checked_numel(shape) == 0) return;
  switch (dtype_storage_size(src.dtype())) {
    case 0:
      copy_box_t(src.strings().data(), src_tab, dst.mutable_strings().data(), *dt, shape);
      return;
    case 1: copy_box_t(src.data<uint8_t>(), src_tab, dst.mutable_data<uint8_t>(), *dt, shape); return;
    case 2: copy_box_t(src.data<uint16_t>(), src_tab, dst.mutable_data<uint16_t>(), *dt, shape); return;
    case 4: copy_box_t(src.data<uint32_t>(), src_tab, dst.mutable_data<uint32_t>(), *dt, shape); return;
    case 8: copy_box_t(src.data<uint64_t>(), src_tab, dst.mutable_data<uint64_t>(), *dt, shape); return;
  }
  fail("copy_box: unsupported element size for ", dtype_name(src.dtype()));
}

AxisTables box_tables(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& start,
                      const std::vector<int64_t>& count) {
  const std::vector<int64_t> strides = strides_of(in_shape);
  AxisTables t(in_shape.size());
  for (size_t d = 0; d < in_shape.size(); ++d) {
    t[d].resize(static_cast<size_t>(count[d]));
    for (int64_t o = 0; o < count[d]; ++o) t[d][static_cast<size_t>(o)] = (start[d] + o) * strides[d];
  }
  return t;
}

void fill_with(Tensor& t, const Tensor& value, int64_t si) {
  TS_CHECK(t.dtype() == value.dtype(), "fill_with: dtype mismatch");
  const int64_t n = t.numel();
  if (n == 0) return;
  if (t.dtype() == DType::String) {
    const std::string v = value.strings()[static_cast<size_t>(si)];
    for (auto& s : t.mutable_strings()) s = v;
    return;
  }
  const int64_t es = dtype_storage_size(t.dtype());
  uint8_t* d = t.mutable_raw();
  const uint8_t* v = value.raw() + si * es;
  bool all_zero = true;
  for (int64_t b = 0; b < es; ++b) all_zero = all_zero && v[b] == 0;
  if (all_zero) {
    std::memset(d, 0, static_cast<size_t>(n * es));
    return;
  }
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * es, v, static_cast<size_t>(es));
}

Tensor convert_scalar(const Tensor& v, DType dt, const Node& n, const char* what) {
  TS_CHECK(v.numel() == 1, n.describe(), ": ", what, " must hold one element, got shape ", dims_str(v.shape()));
  Tensor s = v.reshaped({});
  if (s.dtype() == dt) return s;
  TS_CHECK(s.dtype() != DType::String && dt != DType::String, n.describe(), ": ", what, " has dtype ",
           dtype_name(v.dtype()), ", expected ", dtype_name(dt));
  return s.cast(dt);
}

// ---- integer inputs ----------------------------------------------------------

bool is_index_dtype(DType t) { return t == DType::I32 || t == DType::I64; }

std::vector<int64_t> int_values(const Tensor& t, const Node& n, const char* what) {
  TS_CHECK(is_int(t.dtype()), n.describe(), ": ", what, " must be an integer tensor, got ", dtype_name(t.dtype()));
  TS_CHECK(t.rank() <= 1, n.describe(), ": ", what, " must be a scalar or 1-D tensor, got shape ",
           dims_str(t.shape()));
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_i64(i);
  return v;
}

std::vector<int64_t> index_values(const Tensor& t, const Node& n, const char* what) {
  TS_CHECK(is_index_dtype(t.dtype()), n.describe(), ": ", what, " must be int32 or int64, got ",
           dtype_name(t.dtype()));
  return int_values(t, n, what);
}

int64_t int_scalar(const Tensor& t, const Node& n, const char* what) {
  TS_CHECK(t.numel() == 1 && t.rank() <= 1, n.describe(), ": ", what, " must be a scalar, got shape ",
           dims_str(t.shape()));
  return int_values(t, n, what)[0];
}

std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank, const Node& n) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    const int64_t x = normalize_axis(a, rank, n);
    TS_CHECK(!seen[static_cast<size_t>(x)], n.describe(), ": axis ", a, " is repeated");
    seen[static_cast<size_t>(x)] = true;
    out.push_back(x);
  }
  return out;
}

// ---- inference helpers -------------------------------------------------------

Dim fresh_dim(const InferContext& ctx, size_t out, size_t d) {
  std::string base;
  const Value* v = out < ctx.node.outputs.size() ? ctx.node.outputs[out] : nullptr;
  if (v && !v->name.empty()) {
    base = v->name;
  } else {
    base = ctx.node.op + "_out" + std::to_string(out);
  }
  for (char& c : base)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) c = '_';
  return Dim::sym("unk__" + base + "_" + std::to_string(d));
}

Shape fresh_shape(const InferContext& ctx, size_t out, size_t rank) {
  Shape s;
  for (size_t d = 0; d < rank; ++d) s.push_back(fresh_dim(ctx, out, d));
  return s;
}

void maybe_set_sym(InferContext& ctx, size_t i, SymValue v) {
  if (v.size() <= kMaxSymElements) ctx.set_output_sym(i, std::move(v));
}

std::optional<std::vector<int64_t>> const_ints(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::nullopt;
  auto v = ctx.input_dims_value(i);
  if (!v) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& d : *v) {
    if (!d.is_const()) return std::nullopt;
    out.push_back(d.value());
  }
  return out;
}

std::optional<int64_t> known_length(const InferContext& ctx, size_t i) {
  if (!ctx.has_shape(i)) return std::nullopt;
  const Shape& s = ctx.input_shape(i);
  if (s.empty()) return 1;
  if (s.size() != 1 || !s[0].is_const()) return std::nullopt;
  return s[0].value();
}

bool known_nonneg(const Dim& d) { return Dim::max(d, 0) == d; }
bool known_negative(const Dim& d) { return Dim::min(d, -1) == d; }

void check_index_input(const InferContext& ctx, size_t i, bool int64_only) {
  if (!ctx.has_input(i)) return;
  const DType t = ctx.input_dtype(i);
  if (t == DType::Undefined) return;
  if (int64_only)
    check_dtype(ctx.node, i, t, [](DType x) { return x == DType::I64; }, "int64");
  else
    check_dtype(ctx.node, i, t, is_index_dtype, "int32 or int64");
}

// ---- upgrade helpers ---------------------------------------------------------

void bind_const_input(Node& node, size_t slot, Tensor t, const std::string& hint) {
  Graph* g = node.owner;
  TS_CHECK(g, node.describe(), ": node has no owning graph");
  Value* v = g->add_initializer(g->fresh_name(node.name.empty() ? node.op + "_" + hint : node.name + "_" + hint),
                                std::move(t));
  if (node.inputs.size() <= slot) node.inputs.resize(slot + 1, nullptr);
  node.inputs[slot] = v;
}

void attr_to_input(Node& node, const std::string& attr, size_t slot) {
  if (!node.has_attr(attr)) return;
  Tensor t = Tensor::from_i64(node.attr_ints(attr));
  node.attrs.erase(attr);
  bind_const_input(node, slot, std::move(t), attr);
}

}  // namespace tessel::movement
