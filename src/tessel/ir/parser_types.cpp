// The graph IR text parser's types and constants: element types with
// their shapes (dims handed to Dim::parse as text), and constant tensors
// written as elements, as hex bytes, or as external constants (`ext:N`,
// borrowed when the owner keeps them alive and they are aligned).
#include <cctype>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

#include "tessel/ir/parser.h"
#include "tessel/ir/parser_internal.h"
#include "tessel/support/error.h"

namespace tessel::ir_parser {

Type Parser::type_only() {
  skip_ws();
  Type t = type();
  skip_ws();
  if (pos_ != s_.size()) error(pos_, "unexpected text after the type");
  return t;
}

// ---- types --------------------------------------------------------------------

Dim Parser::dim() {
  skip_ws();
  size_t start = pos_;
  int depth = 0;
  while (!at_end()) {
    char c = peek();
    if (c == '"') {
      ++pos_;
      while (!at_end() && peek() != '"') {
        if (peek() == '\\') ++pos_;
        ++pos_;
      }
      if (at_end()) error(start, "unterminated quoted symbol");
      ++pos_;
      continue;
    }
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == ']')) break;
    if (depth < 0 || c == '\n' || c == '{' || c == '}' || c == '[') break;
    ++pos_;
  }
  std::string text = s_.substr(start, pos_ - start);
  if (text.find_first_not_of(" \t") == std::string::npos) error(start, "expected a dimension");
  try {
    return Dim::parse(text);
  } catch (const Error& e) {
    error(start, e.what());
  }
}

bool Parser::type_ahead() {
  skip_ws();
  if (peek() == '?') return true;
  std::string w = peek_ident(false);
  DType dt;
  return w == "seq" || w == "opt" || dtype_from_name(w, &dt);
}

Type Parser::type() {
  skip_ws();
  size_t at = pos_;
  DType dt = DType::Undefined;
  if (eat('?')) {
    if (peek() != '[') return Type{};
  } else {
    std::string w = ident(false);
    if (w == "seq" || w == "opt") {
      expect('<');
      Type elem = type();
      expect('>');
      return w == "seq" ? Type::sequence(std::move(elem)) : Type::optional(std::move(elem));
    }
    if (!dtype_from_name(w, &dt)) error(at, "unknown type '" + w + "'");
  }
  if (peek() != '[') error(pos_, "expected '[' after the element type");
  ++pos_;
  if (eat('*')) {
    expect(']');
    return Type::tensor_unknown_shape(dt);
  }
  Shape shape;
  if (!eat(']')) {
    do shape.push_back(dim());
    while (eat(','));
    expect(']');
  }
  return Type::tensor(dt, std::move(shape));
}

// ---- tensors --------------------------------------------------------------------

void Parser::tensor_element(Tensor* t, int64_t i) {
  const DType dt = t->dtype();
  skip_ws();
  if (dt == DType::String) {
    t->mutable_strings()[static_cast<size_t>(i)] = string_lit();
    return;
  }
  if (dt == DType::Bool) {
    std::string w = peek_ident(false);
    if (w == "true" || w == "false") {
      pos_ += w.size();
      t->set_i64(i, w == "true");
      return;
    }
    Number n = number();
    int64_t v = to_int(n);
    if (v != 0 && v != 1) error(n.at, "bool element must be true or false");
    t->set_i64(i, v);
    return;
  }
  Number n = number();
  if (n.is_hex) {
    const int sz = dtype_storage_size(dt);
    std::string digits = n.text.substr(2);
    if (digits.empty() || digits.size() > static_cast<size_t>(2 * sz))
      error(n.at, str_cat("bit pattern '", n.text, "' does not fit ", dtype_name(dt)));
    uint64_t bits = 0;
    for (char c : digits) bits = bits * 16 + static_cast<uint64_t>(hex_digit(c));
    uint8_t* p = t->mutable_raw() + i * sz;
    for (int k = 0; k < sz; ++k) p[k] = static_cast<uint8_t>(bits >> (8 * k));
    return;
  }
  if (is_float(dt)) {
    if (!detail::set_float_element(t, i, n.text)) error(n.at, "bad float '" + n.text + "'");
    return;
  }
  if (n.is_float) error(n.at, str_cat("expected an integer for ", dtype_name(dt), ", got '", n.text, "'"));
  const int bits = int_bits(dt);
  if (is_unsigned_int(dt)) {
    uint64_t v = 0;
    const char* b = n.text.data() + (n.text[0] == '+' ? 1 : 0);
    auto r = std::from_chars(b, n.text.data() + n.text.size(), v);
    if (n.text[0] == '-' || r.ec != std::errc() || r.ptr != n.text.data() + n.text.size() ||
        (bits < 64 && v >= (uint64_t{1} << bits)))
      error(n.at, str_cat("value ", n.text, " is out of range for ", dtype_name(dt)));
    t->set_u64(i, v);
    return;
  }
  int64_t v = to_int(n);
  if (bits < 64 && (v < -(int64_t{1} << (bits - 1)) || v >= (int64_t{1} << (bits - 1))))
    error(n.at, str_cat("value ", n.text, " is out of range for ", dtype_name(dt)));
  t->set_i64(i, v);
}

Tensor Parser::tensor() {
  skip_ws();
  size_t at = pos_;
  Type ty = type();
  if (!ty.is_tensor() || ty.dtype == DType::Undefined || !ty.shape || !is_static(*ty.shape))
    error(at, "a constant needs a known element type and a static shape");
  if (std::optional<Tensor> b = borrowed_external(ty, at)) return *b;
  Tensor t;
  try {
    t = Tensor(ty.dtype, static_dims(*ty.shape));
  } catch (const Error& e) {
    error(at, e.what());
  }
  if (t.dtype() == DType::String) t.mutable_strings().assign(static_cast<size_t>(t.numel()), "");
  tensor_body(&t);
  return t;
}

void Parser::tensor_body(Tensor* t) {
  skip_ws();
  expect_word("dense");
  expect('<');
  skip_ws();
  size_t at = pos_;
  if (eat_str("...")) error(at, "elided constant (printed with elide_large_constants) cannot be parsed");
  if (eat_str("ext:")) {
    external_constant(t, at);
  } else if (eat_str("hex:")) {
    if (t->dtype() == DType::String) error(at, "string tensors cannot be given in hex");
    const size_t n = t->nbytes();
    size_t p = pos_;
    while (p < s_.size() && hex_digit(s_[p]) >= 0) ++p;
    if (p - pos_ != 2 * n)
      error(pos_, str_cat("hex data has ", (p - pos_) / 2, " bytes, the type needs ", n));
    uint8_t* out = t->mutable_raw();
    for (size_t i = 0; i < n; ++i)
      out[i] = static_cast<uint8_t>(hex_digit(s_[pos_ + 2 * i]) * 16 + hex_digit(s_[pos_ + 2 * i + 1]));
    pos_ = p;
    if (is_float(t->dtype()) || t->dtype() == DType::Bool || int_bits_below_8(t->dtype())) check_storage(*t, at);
  } else {
    expect('[');
    int64_t i = 0;
    if (!eat(']')) {
      do {
        if (i >= t->numel()) error(pos_, str_cat("too many elements, the type holds ", t->numel()));
        tensor_element(t, i++);
      } while (eat(','));
      expect(']');
    }
    if (i != t->numel()) error(at, str_cat("expected ", t->numel(), " elements, got ", i));
  }
  expect('>');
}

// The N of `ext:N` (after "ext:") and its bytes.
std::pair<size_t, std::string_view> Parser::external_bytes(size_t at) {
  size_t p = pos_;
  while (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) ++p;
  if (p == pos_ || p - pos_ > 18) error(pos_, "expected the number of an external constant");
  const size_t n = static_cast<size_t>(std::stoull(s_.substr(pos_, p - pos_)));
  pos_ = p;
  if (!external_ || n >= external_->size())
    error(at, str_cat("external constant ", n, " is not given (", external_ ? external_->size() : 0, " are)"));
  return {n, (*external_)[n]};
}

// A constant's body `dense<ext:N>` over bytes that `owner_` keeps alive
// and that are aligned for any vector load: a tensor that borrows them (no
// copy, no allocation). nullopt, at the same position, for any other body
// (the caller parses it, copying).
std::optional<Tensor> Parser::borrowed_external(const Type& ty, size_t at) {
  skip_ws();
  const size_t start = pos_;
  if (!owner_ || !eat_str("dense<ext:")) return std::nullopt;
  const auto [n, bytes] = external_bytes(at);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 64 != 0 || ty.dtype == DType::String) {
    pos_ = start;
    return std::nullopt;
  }
  Tensor t;
  try {
    t = Tensor::borrow(ty.dtype, static_dims(*ty.shape), bytes.empty() ? nullptr : bytes.data(), owner_);
  } catch (const Error& e) {
    error(at, e.what());
  }
  if (bytes.size() != t.nbytes())
    error(at, str_cat("external constant ", n, " has ", bytes.size(), " bytes, the type needs ", t.nbytes()));
  if (is_float(t.dtype()) || t.dtype() == DType::Bool || int_bits_below_8(t.dtype())) check_storage(t, at);
  expect('>');
  return t;
}

// `dense<ext:N>`: the bytes of external constant N, which must fill the type exactly.
void Parser::external_constant(Tensor* t, size_t at) {
  if (t->dtype() == DType::String) error(at, "string tensors cannot be external");
  const auto [n, bytes] = external_bytes(at);
  if (bytes.size() != t->nbytes())
    error(at, str_cat("external constant ", n, " has ", bytes.size(), " bytes, the type needs ", t->nbytes()));
  if (!bytes.empty()) std::memcpy(t->mutable_raw(), bytes.data(), bytes.size());
  if (is_float(t->dtype()) || t->dtype() == DType::Bool || int_bits_below_8(t->dtype())) check_storage(*t, at);
}

// Sub-byte and bool storage must hold valid items (see dtype.h).
void Parser::check_storage(const Tensor& t, size_t at) {
  const DType dt = t.dtype();
  if (dt == DType::Bool) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.raw()[i] > 1) error(at, "bool data must be 0 or 1");
  } else if (int_bits_below_8(dt) || dt == DType::F4E2M1) {
    const int bits = dt == DType::F4E2M1 ? 4 : int_bits(dt);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int v = is_signed_int(dt) ? static_cast<int8_t>(t.raw()[i]) : t.raw()[i];
      const int lo = is_signed_int(dt) ? -(1 << (bits - 1)) : 0;
      const int hi = is_signed_int(dt) ? (1 << (bits - 1)) : (1 << bits);
      if (v < lo || v >= hi) error(at, str_cat("element ", i, " does not fit ", dtype_name(dt)));
    }
  }
}

}  // namespace tessel::ir_parser
