// The graph IR text parser's characters and tokens: errors with their
// "<line>:<col>", whitespace and comments, identifiers, quoted strings and
// %/@ names, and numbers (with the float parsing the printer shares).
#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>

#include "tessel/ir/parser.h"
#include "tessel/ir/parser_internal.h"
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

namespace ir_parser {

// ---- errors and characters --------------------------------------------------

void Parser::error(size_t at, const std::string& what) const {
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

void Parser::skip_ws() {
  for (;;) {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (peek() == '/' && peek_at(1) == '/') {
      while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      continue;
    }
    return;
  }
}

bool Parser::eat(char c) {
  skip_ws();
  if (peek() == c) {
    ++pos_;
    return true;
  }
  return false;
}

bool Parser::eat_str(const char* w) {
  skip_ws();
  size_t n = std::strlen(w);
  if (s_.compare(pos_, n, w) == 0) {
    pos_ += n;
    return true;
  }
  return false;
}

std::string Parser::describe_here() const {
  if (at_end()) return "end of input";
  std::string tok;
  for (size_t i = pos_; i < s_.size() && tok.size() < 12 && !std::isspace(static_cast<unsigned char>(s_[i])); ++i)
    tok += s_[i];
  return "'" + tok + "'";
}

void Parser::expect(char c) {
  if (!eat(c)) error(pos_, str_cat("expected '", c, "', got ", describe_here()));
}

// Peeks the identifier at the current position without consuming it.
std::string Parser::peek_ident(bool dot) {
  skip_ws();
  size_t p = pos_;
  if (p >= s_.size() || !ident_start(s_[p])) return "";
  while (p < s_.size() && ident_char(s_[p], dot)) ++p;
  return s_.substr(pos_, p - pos_);
}

std::string Parser::ident(bool dot) {
  std::string w = peek_ident(dot);
  if (w.empty()) error(pos_, "expected an identifier, got " + describe_here());
  pos_ += w.size();
  return w;
}

void Parser::expect_word(const char* w) {
  size_t at = pos_;
  std::string got = peek_ident(true);
  if (got != w) error(at, str_cat("expected '", w, "', got ", describe_here()));
  pos_ += got.size();
}

std::string Parser::string_lit() {
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

std::string Parser::ident_or_string(bool dot) {
  skip_ws();
  if (peek() == '"') return string_lit();
  return ident(dot);
}

// Name after % or @: quoted, or [A-Za-z0-9_.]+.
std::string Parser::sigil_name() {
  if (peek() == '"') return string_lit();
  size_t p = pos_;
  while (p < s_.size() && ident_char(s_[p], true)) ++p;
  if (p == pos_) error(pos_, "expected a name, got " + describe_here());
  std::string n = s_.substr(pos_, p - pos_);
  pos_ = p;
  return n;
}

// ---- numbers ------------------------------------------------------------------

bool Parser::number_ahead() {
  skip_ws();
  char c = peek();
  if (c == '-' || c == '+') c = peek_at(1);
  if (std::isdigit(static_cast<unsigned char>(c))) return true;
  size_t p = pos_ + ((peek() == '-' || peek() == '+') ? 1 : 0);
  for (const char* w : {"nan", "inf"})
    if (s_.compare(p, 3, w) == 0 && !ident_char(p + 3 < s_.size() ? s_[p + 3] : ' ', true)) return true;
  return false;
}

Parser::Number Parser::number() {
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

int64_t Parser::to_int(const Number& n) {
  if (n.is_float || n.is_hex) error(n.at, "expected an integer, got '" + n.text + "'");
  const char* b = n.text.data();
  if (*b == '+') ++b;
  int64_t v = 0;
  auto r = std::from_chars(b, n.text.data() + n.text.size(), v);
  if (r.ec != std::errc() || r.ptr != n.text.data() + n.text.size())
    error(n.at, "integer '" + n.text + "' is out of range");
  return v;
}

float Parser::to_float(const Number& n) {
  if (n.is_hex) error(n.at, "expected a float, got '" + n.text + "'");
  Tensor t(DType::F32, {1});
  if (!detail::set_float_element(&t, 0, n.text)) error(n.at, "bad float '" + n.text + "'");
  return t.data<float>()[0];
}

}  // namespace ir_parser
}  // namespace tessel
