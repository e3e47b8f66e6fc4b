// Parser of the graph IR text form (grammar in docs/ir.md). A hand-written
// recursive-descent parser over characters: the grammar is small, and dims
// are handed to Dim::parse as raw text. Every error is "<line>:<col>: <what>".
//
// Values must be defined before they are used (the text is in node order);
// name lookup walks the enclosing graphs, so a subgraph sees the values of
// its ancestors but never those of a sibling graph.
#include "tessel/ir/parser.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "tessel/support/error.h"

namespace tessel {

namespace detail {

bool set_float_element(Tensor* t, int64_t i, const std::string& text) {
  const DType dt = t->dtype();
  if (!is_float(dt)) return false;
  const char* b = text.data();
  const char* e = b + text.size();
  bool neg = false;
  if (b != e && (*b == '-' || *b == '+')) {
    neg = *b == '-';
    ++b;
  }
  std::string_view rest(b, static_cast<size_t>(e - b));
  double v = 0;
  if (rest == "nan") {
    v = std::numeric_limits<double>::quiet_NaN();
    if (neg) v = -v;
  } else if (rest == "inf") {
    v = neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  } else if (rest.empty() || !(std::isdigit(static_cast<unsigned char>(rest[0])) || rest[0] == '.')) {
    return false;
  } else if (dt == DType::F64) {
    auto r = std::from_chars(b, e, v);
    if (r.ec != std::errc() || r.ptr != e) return false;
    if (neg) v = -v;
  } else {
    // Every narrower float type is exactly representable as a float, and the
    // printer writes the shortest float form, so parse as float (parsing as
    // double and rounding again could round twice).
    float f = 0;
    auto r = std::from_chars(b, e, f);
    if (r.ec != std::errc() || r.ptr != e) return false;
    v = neg ? -static_cast<double>(f) : static_cast<double>(f);
  }
  t->set_f64(i, v);
  return true;
}

}  // namespace detail

namespace {

class Parser {
 public:
  explicit Parser(const std::string& s, const std::vector<std::string_view>* external = nullptr,
                  std::shared_ptr<const void> owner = nullptr)
      : s_(s), external_(external), owner_(std::move(owner)) {}

  std::unique_ptr<Model> model() {
    auto m = std::make_unique<Model>();
    skip_ws();
    expect_word("tessel.model");
    for (;;) {
      skip_ws();
      if (peek() == '{') break;
      size_t at = pos_;
      std::string key = ident(true);
      if (key == "opset") {
        expect('(');
        if (!eat(')')) {
          do {
            std::string dom = ident_or_string(true);
            expect('=');
            int64_t v = integer();
            if (dom == "ai.onnx") dom = "";
            if (m->opsets.count(dom)) error(at, "opset for domain '" + dom + "' given twice");
            m->opsets[dom] = v;
          } while (eat(','));
          expect(')');
        }
      } else if (key == "ir_version") {
        expect('=');
        m->ir_version = integer();
      } else if (key == "producer") {
        expect('=');
        m->producer_name = string_lit();
      } else if (key == "metadata") {
        expect('(');
        if (!eat(')')) {
          do {
            std::string k = string_lit();
            expect('=');
            m->metadata[k] = string_lit();
          } while (eat(','));
          expect(')');
        }
      } else {
        error(at, "unknown model property '" + key + "'");
      }
    }
    expect('{');
    graph(*m->graph);
    expect('}');
    skip_ws();
    if (pos_ != s_.size()) error(pos_, "unexpected text after the model");
    return m;
  }

  Type type_only() {
    skip_ws();
    Type t = type();
    skip_ws();
    if (pos_ != s_.size()) error(pos_, "unexpected text after the type");
    return t;
  }

 private:
  const std::string& s_;
  const std::vector<std::string_view>* external_;
  std::shared_ptr<const void> owner_;  // keeps external bytes alive: they may be borrowed
  size_t pos_ = 0;

  // ---- errors and characters --------------------------------------------------

  [[noreturn]] void error(size_t at, const std::string& what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    fail(line, ":", col, ": ", what);
  }

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  char peek_at(size_t k) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }

  void skip_ws() {
    for (;;) {
      while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      if (peek() == '/' && peek_at(1) == '/') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
        continue;
      }
      return;
    }
  }

  bool eat(char c) {
    skip_ws();
    if (peek() == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool eat_str(const char* w) {
    skip_ws();
    size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }

  std::string describe_here() const {
    if (at_end()) return "end of input";
    std::string tok;
    for (size_t i = pos_; i < s_.size() && tok.size() < 12 && !std::isspace(static_cast<unsigned char>(s_[i])); ++i)
      tok += s_[i];
    return "'" + tok + "'";
  }

  void expect(char c) {
    if (!eat(c)) error(pos_, str_cat("expected '", c, "', got ", describe_here()));
  }

  static bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
  static bool ident_char(char c, bool dot) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (dot && c == '.');
  }

  // Peeks the identifier at the current position without consuming it.
  std::string peek_ident(bool dot) {
    skip_ws();
    size_t p = pos_;
    if (p >= s_.size() || !ident_start(s_[p])) return "";
    while (p < s_.size() && ident_char(s_[p], dot)) ++p;
    return s_.substr(pos_, p - pos_);
  }

  std::string ident(bool dot) {
    std::string w = peek_ident(dot);
    if (w.empty()) error(pos_, "expected an identifier, got " + describe_here());
    pos_ += w.size();
    return w;
  }

  void expect_word(const char* w) {
    size_t at = pos_;
    std::string got = peek_ident(true);
    if (got != w) error(at, str_cat("expected '", w, "', got ", describe_here()));
    pos_ += got.size();
  }

  std::string string_lit() {
    skip_ws();
    if (peek() != '"') error(pos_, "expected a string, got " + describe_here());
    size_t start = pos_++;
    std::string out;
    for (;;) {
      if (at_end()) error(start, "unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_end()) error(start, "unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
          int v = 0;
          for (int k = 0; k < 2; ++k) {
            int h = hex_digit(peek());
            if (h < 0) error(pos_, "bad \\x escape");
            v = v * 16 + h;
            ++pos_;
          }
          out += static_cast<char>(v);
          break;
        }
        default: error(pos_ - 1, str_cat("unknown escape '\\", e, "'"));
      }
    }
  }

  std::string ident_or_string(bool dot) {
    skip_ws();
    if (peek() == '"') return string_lit();
    return ident(dot);
  }

  // Name after % or @: quoted, or [A-Za-z0-9_.]+.
  std::string sigil_name() {
    if (peek() == '"') return string_lit();
    size_t p = pos_;
    while (p < s_.size() && ident_char(s_[p], true)) ++p;
    if (p == pos_) error(pos_, "expected a name, got " + describe_here());
    std::string n = s_.substr(pos_, p - pos_);
    pos_ = p;
    return n;
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // ---- numbers ------------------------------------------------------------------

  struct Number {
    std::string text;
    bool is_float = false;  // has '.', an exponent, or is nan/inf
    bool is_hex = false;    // 0x... bit pattern
    size_t at = 0;
  };

  bool number_ahead() {
    skip_ws();
    char c = peek();
    if (c == '-' || c == '+') c = peek_at(1);
    if (std::isdigit(static_cast<unsigned char>(c))) return true;
    size_t p = pos_ + ((peek() == '-' || peek() == '+') ? 1 : 0);
    for (const char* w : {"nan", "inf"})
      if (s_.compare(p, 3, w) == 0 && !ident_char(p + 3 < s_.size() ? s_[p + 3] : ' ', true)) return true;
    return false;
  }

  Number number() {
    skip_ws();
    Number n;
    n.at = pos_;
    size_t p = pos_;
    if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
    if (s_.compare(p, 3, "nan") == 0 || s_.compare(p, 3, "inf") == 0) {
      p += 3;
      n.is_float = true;
    } else if (s_.compare(p, 2, "0x") == 0) {
      p += 2;
      while (p < s_.size() && hex_digit(s_[p]) >= 0) ++p;
      n.is_hex = true;
    } else {
      while (p < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[p])) || s_[p] == '.')) {
        if (s_[p] == '.') n.is_float = true;
        ++p;
      }
      if (p < s_.size() && (s_[p] == 'e' || s_[p] == 'E')) {
        n.is_float = true;
        ++p;
        if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
        while (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) ++p;
      }
    }
    n.text = s_.substr(pos_, p - pos_);
    if (p < s_.size() && ident_char(s_[p], false)) error(p, "malformed number");
    if (n.text.empty() || n.text == "-" || n.text == "+") error(pos_, "expected a number, got " + describe_here());
    pos_ = p;
    return n;
  }

  int64_t to_int(const Number& n) {
    if (n.is_float || n.is_hex) error(n.at, "expected an integer, got '" + n.text + "'");
    const char* b = n.text.data();
    if (*b == '+') ++b;
    int64_t v = 0;
    auto r = std::from_chars(b, n.text.data() + n.text.size(), v);
    if (r.ec != std::errc() || r.ptr != n.text.data() + n.text.size())
      error(n.at, "integer '" + n.text + "' is out of range");
    return v;
  }

  int64_t integer() { return to_int(number()); }

  float to_float(const Number& n) {
    if (n.is_hex) error(n.at, "expected a float, got '" + n.text + "'");
    Tensor t(DType::F32, {1});
    if (!detail::set_float_element(&t, 0, n.text)) error(n.at, "bad float '" + n.text + "'");
    return t.data<float>()[0];
  }

  // ---- types --------------------------------------------------------------------

  Dim dim() {
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

  bool type_ahead() {
    skip_ws();
    if (peek() == '?') return true;
    std::string w = peek_ident(false);
    DType dt;
    return w == "seq" || w == "opt" || dtype_from_name(w, &dt);
  }

  Type type() {
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

  void tensor_element(Tensor* t, int64_t i) {
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

  Tensor tensor() {
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

  void tensor_body(Tensor* t) {
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
  std::pair<size_t, std::string_view> external_bytes(size_t at) {
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
  std::optional<Tensor> borrowed_external(const Type& ty, size_t at) {
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
  void external_constant(Tensor* t, size_t at) {
    if (t->dtype() == DType::String) error(at, "string tensors cannot be external");
    const auto [n, bytes] = external_bytes(at);
    if (bytes.size() != t->nbytes())
      error(at, str_cat("external constant ", n, " has ", bytes.size(), " bytes, the type needs ", t->nbytes()));
    if (!bytes.empty()) std::memcpy(t->mutable_raw(), bytes.data(), bytes.size());
    if (is_float(t->dtype()) || t->dtype() == DType::Bool || int_bits_below_8(t->dtype())) check_storage(*t, at);
  }

  static bool int_bits_below_8(DType dt) { return is_int(dt) && int_bits(dt) < 8; }

  // Sub-byte and bool storage must hold valid items (see dtype.h).
  void check_storage(const Tensor& t, size_t at) {
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

  // ---- attributes -------------------------------------------------------------------

  Attribute attribute(Graph& g) {
    skip_ws();
    size_t at = pos_;
    Attribute a;
    using K = Attribute::Kind;
    std::string w = peek_ident(false);
    if (peek() == '[' || ((w == "ints" || w == "floats" || w == "strings" || w == "tensors" || w == "graphs") &&
                          [&] {
                            size_t p = pos_ + w.size();
                            while (p < s_.size() && std::isspace(static_cast<unsigned char>(s_[p]))) ++p;
                            return p < s_.size() && s_[p] == '[';
                          }())) {
      std::string tag;
      if (peek() != '[') {
        tag = w;
        pos_ += w.size();
      }
      expect('[');
      skip_ws();
      if (peek() == ']') {
        ++pos_;
        if (tag.empty()) error(at, "an empty list needs its kind: ints[], floats[], strings[], tensors[] or graphs[]");
        a.kind = tag == "ints" ? K::Ints : tag == "floats" ? K::Floats : tag == "strings" ? K::Strings
                 : tag == "tensors" ? K::Tensors : K::Graphs;
        return a;
      }
      // The first element decides the kind.
      std::string first = peek_ident(false);
      if (peek() == '"') {
        a.kind = K::Strings;
      } else if (first == "graph") {
        a.kind = K::Graphs;
      } else if (number_ahead()) {
        a.kind = K::Ints;
      } else if (type_ahead()) {
        a.kind = K::Tensors;
      } else {
        error(pos_, "unexpected list element " + describe_here());
      }
      std::vector<Number> nums;
      do {
        switch (a.kind) {
          case K::Strings: a.strings.push_back(string_lit()); break;
          case K::Graphs: a.graphs.push_back(subgraph(g)); break;
          case K::Tensors: a.tensors.push_back(tensor()); break;
          default: nums.push_back(number());
        }
      } while (eat(','));
      expect(']');
      if (a.kind == K::Ints) {
        bool any_float = tag == "floats";
        for (const Number& n : nums) any_float = any_float || n.is_float;
        if (any_float) {
          a.kind = K::Floats;
          for (const Number& n : nums) a.floats.push_back(to_float(n));
        } else {
          for (const Number& n : nums) a.ints.push_back(to_int(n));
        }
      }
      const char* got = a.kind == K::Ints ? "ints" : a.kind == K::Floats ? "floats" : a.kind == K::Strings ? "strings"
                        : a.kind == K::Tensors ? "tensors" : "graphs";
      if (!tag.empty() && tag != got) error(at, str_cat("list tagged ", tag, " holds ", got));
      return a;
    }
    if (peek() == '"') {
      a.kind = K::String;
      a.s = string_lit();
      return a;
    }
    if (number_ahead()) {
      Number n = number();
      if (n.is_float) {
        a.kind = K::Float;
        a.f = to_float(n);
      } else {
        a.kind = K::Int;
        a.i = to_int(n);
      }
      return a;
    }
    if (w == "graph") {
      a.kind = K::Graph;
      a.g = subgraph(g);
      return a;
    }
    if (w == "type" && peek_at(4) == '<') {
      pos_ += 4;
      expect('<');
      a.kind = K::TypeProto;
      a.type = type();
      expect('>');
      return a;
    }
    if (type_ahead()) {
      a.kind = K::Tensor;
      a.t = tensor();
      return a;
    }
    error(at, "expected an attribute value, got " + describe_here());
  }

  // ---- graphs -------------------------------------------------------------------------

  std::shared_ptr<Graph> subgraph(Graph& parent) {
    auto sg = std::make_shared<Graph>();
    sg->parent = &parent;
    graph(*sg);
    return sg;
  }

  // A value name visible from `g` (its own values and those of its ancestors).
  Value* lookup(Graph& g, const std::string& name) { return g.find_value(name); }

  Value* define(Graph& g, const std::string& name, size_t at, Type t) {
    if (lookup(g, name)) error(at, "value " + name_for_msg(name) + " is already defined");
    return g.add_value(name, std::move(t));
  }

  static std::string name_for_msg(const std::string& n) { return "%" + n; }

  Value* use(Graph& g) {
    skip_ws();
    size_t at = pos_;
    if (peek() == '_' && !ident_char(peek_at(1), true)) {
      ++pos_;
      return nullptr;
    }
    if (peek() != '%') error(at, "expected a value (%name or _), got " + describe_here());
    ++pos_;
    std::string n = sigil_name();
    Value* v = lookup(g, n);
    if (!v) error(at, "use of undefined value " + name_for_msg(n));
    return v;
  }

  void graph(Graph& g) {
    skip_ws();
    expect_word("graph");
    skip_ws();
    if (peek() != '@') error(pos_, "expected '@name' after 'graph'");
    ++pos_;
    g.name = sigil_name();
    expect('(');
    if (!eat(')')) {
      do {
        skip_ws();
        size_t at = pos_;
        if (peek() != '%') error(at, "expected an input '%name: type'");
        ++pos_;
        std::string n = sigil_name();
        expect(':');
        Type t = type();
        if (lookup(g, n)) error(at, "value " + name_for_msg(n) + " is already defined");
        Value* v = g.add_input(n, t);
        if (eat('=')) {
          if (!t.is_tensor() || t.dtype == DType::Undefined || !t.shape || !is_static(*t.shape))
            error(at, "an input with a default value needs a static tensor type");
          Tensor c(t.dtype, static_dims(*t.shape));
          if (c.dtype() == DType::String) c.mutable_strings().assign(static_cast<size_t>(c.numel()), "");
          tensor_body(&c);
          v->constant = std::move(c);
        }
      } while (eat(','));
      expect(')');
    }
    if (!eat_str("->")) error(pos_, "expected '->' after the graph inputs");
    // The signature repeats the outputs for readers; `return` defines them.
    struct SigOut {
      std::string name;  // "" for _
      size_t at;
    };
    std::vector<SigOut> sig;
    expect('(');
    if (!eat(')')) {
      do {
        skip_ws();
        size_t at = pos_;
        if (peek() == '_') {
          ++pos_;
          sig.push_back({"", at});
          continue;
        }
        if (peek() != '%') error(at, "expected an output '%name: type'");
        ++pos_;
        sig.push_back({sigil_name(), at});
        expect(':');
        type();
      } while (eat(','));
      expect(')');
    }
    expect('{');
    for (;;) {
      skip_ws();
      if (at_end()) error(pos_, "unterminated graph @" + g.name);
      size_t at = pos_;
      if (peek_ident(false) == "return") {
        pos_ += 6;
        skip_ws();
        if (peek() != '}') {
          do g.outputs.push_back(use(g));
          while (eat(','));
        }
        expect('}');
        break;
      }
      statement(g);
      (void)at;
    }
    if (sig.size() != g.outputs.size())
      error(pos_, str_cat("graph @", g.name, " declares ", sig.size(), " outputs but returns ", g.outputs.size()));
    for (size_t i = 0; i < sig.size(); ++i) {
      const std::string got = g.outputs[i] ? g.outputs[i]->name : "";
      if (sig[i].name != got)
        error(sig[i].at, str_cat("output ", i, " of graph @", g.name, " is declared as ",
                                 sig[i].name.empty() ? "_" : name_for_msg(sig[i].name), " but returned as ",
                                 got.empty() ? "_" : name_for_msg(got)));
    }
  }

  void statement(Graph& g) {
    skip_ws();
    // Output list (absent for a node without outputs).
    struct Out {
      std::string name;  // "" = omitted
      size_t at;
    };
    std::vector<Out> outs;
    bool has_outs = peek() == '%' || (peek() == '_' && !ident_char(peek_at(1), true));
    if (has_outs) {
      do {
        skip_ws();
        size_t at = pos_;
        if (peek() == '_' && !ident_char(peek_at(1), true)) {
          ++pos_;
          outs.push_back({"", at});
          continue;
        }
        if (peek() != '%') error(at, "expected an output value, got " + describe_here());
        ++pos_;
        outs.push_back({sigil_name(), at});
      } while (eat(','));
      expect('=');
    }
    skip_ws();
    size_t op_at = pos_;
    if (peek() != '"' && peek_ident(true) == "const") {
      pos_ += 5;
      if (outs.size() != 1 || outs[0].name.empty()) error(op_at, "'const' defines exactly one named value");
      Tensor t = tensor();
      if (lookup(g, outs[0].name)) error(outs[0].at, "value " + name_for_msg(outs[0].name) + " is already defined");
      g.add_initializer(outs[0].name, std::move(t));
      return;
    }
    std::string domain, op = ident_or_string(true);
    if (eat_str("::")) {
      domain = op;
      op = ident_or_string(false);
    } else if (op.find('.') != std::string::npos && s_[op_at] != '"') {
      error(op_at, "operator names cannot contain '.' (use domain::Op)");
    }
    if (op.empty()) error(op_at, "empty operator name");
    std::vector<Value*> inputs;
    expect('(');
    if (!eat(')')) {
      do inputs.push_back(use(g));
      while (eat(','));
      expect(')');
    }
    std::map<std::string, Attribute> attrs;
    if (eat('{')) {
      if (!eat('}')) {
        do {
          skip_ws();
          size_t at = pos_;
          std::string k = ident_or_string(false);
          expect('=');
          if (attrs.count(k)) error(at, "attribute '" + k + "' given twice");
          attrs[k] = attribute(g);
        } while (eat(','));
        expect('}');
      }
    }
    size_t n_present = 0;
    for (const Out& o : outs) n_present += !o.name.empty();
    std::vector<Type> types(n_present);
    if (eat(':')) {
      for (size_t i = 0; i < n_present; ++i) {
        if (i) expect(',');
        types[i] = type();
      }
    }
    std::string node_name;
    if (peek_ident(false) == "name") {
      pos_ += 4;
      node_name = string_lit();
    }
    std::vector<Value*> out_values;
    size_t k = 0;
    for (const Out& o : outs) {
      if (o.name.empty()) {
        out_values.push_back(nullptr);
        continue;
      }
      for (Value* prev : out_values)
        if (prev && prev->name == o.name) error(o.at, "value " + name_for_msg(o.name) + " is already defined");
      out_values.push_back(define(g, o.name, o.at, types[k++]));
    }
    Node* n = g.add_node_with_outputs(op, std::move(inputs), std::move(out_values), std::move(attrs), domain);
    n->name = node_name;
  }
};

}  // namespace

std::unique_ptr<Model> parse_model(const std::string& text, const std::vector<std::string_view>* external_constants,
                                   std::shared_ptr<const void> owner) {
  return Parser(text, external_constants, std::move(owner)).model();
}

Type parse_type(const std::string& text) { return Parser(text).type_only(); }

}  // namespace tessel
