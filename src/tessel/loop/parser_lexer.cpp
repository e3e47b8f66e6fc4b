// The loop IR text parser's lexer: the text as tokens (identifiers,
// %params, numbers with their type suffixes, decoded strings, punctuation),
// each with its line and column for errors.
#include <cctype>
#include <charconv>

#include "tessel/loop/parser_internal.h"
#include "tessel/support/error.h"

namespace tessel::loop::loop_parser {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

}  // namespace

std::vector<Token> Lexer::run() {
  std::vector<Token> out;
  for (;;) {
    skip_space();
    Token t;
    t.line = line_;
    t.col = col_;
    if (pos_ >= s_.size()) {
      out.push_back(t);
      return out;
    }
    const char c = s_[pos_];
    if (ident_start(c)) {
      t.kind = Tok::Ident;
      t.text = take_while(ident_char);
    } else if (c == '%' && pos_ + 1 < s_.size() && ident_start(s_[pos_ + 1])) {
      advance();
      t.kind = Tok::Param;
      t.text = take_while(ident_char);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      t.kind = Tok::Number;
      t.text = number();
    } else if (c == '"') {
      t.kind = Tok::String;
      t.text = string_literal(t);
    } else {
      t.kind = Tok::Punct;
      t.text = punct(t);
    }
    out.push_back(std::move(t));
  }
}

void Lexer::error(const Token& t, const std::string& what) {
  fail(kParseError, " at ", t.line, ":", t.col, ": ", what);
}

void Lexer::advance() {
  if (s_[pos_] == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++pos_;
}

void Lexer::skip_space() {
  while (pos_ < s_.size()) {
    if (std::isspace(static_cast<unsigned char>(s_[pos_]))) {
      advance();
    } else if (s_.compare(pos_, 2, "//") == 0) {  // comments, for hand-written tests
      while (pos_ < s_.size() && s_[pos_] != '\n') advance();
    } else {
      return;
    }
  }
}

template <class Pred>
std::string Lexer::take_while(Pred p) {
  size_t b = pos_;
  while (pos_ < s_.size() && p(s_[pos_])) advance();
  return s_.substr(b, pos_ - b);
}

// Digits, '.', letters (hex digits, exponent, type suffix) and a sign
// right after an exponent letter ('e' in decimal, 'p' in hex).
std::string Lexer::number() {
  size_t b = pos_;
  const bool hex = s_.compare(pos_, 2, "0x") == 0;
  while (pos_ < s_.size()) {
    char c = s_[pos_];
    char prev = pos_ > b ? s_[pos_ - 1] : 0;
    bool sign_ok = (c == '+' || c == '-') && (hex ? (prev == 'p' || prev == 'P') : (prev == 'e' || prev == 'E'));
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || sign_ok)) break;
    advance();
  }
  return s_.substr(b, pos_ - b);
}

std::string Lexer::string_literal(const Token& t) {
  advance();
  std::string out;
  for (;;) {
    if (pos_ >= s_.size() || s_[pos_] == '\n') error(t, "unterminated string");
    char c = s_[pos_];
    advance();
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (pos_ >= s_.size()) error(t, "unterminated string");
    char e = s_[pos_];
    advance();
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'x': {
        std::string hex = s_.substr(pos_, 2);
        unsigned v = 0;
        auto r = std::from_chars(hex.data(), hex.data() + hex.size(), v, 16);
        if (hex.size() != 2 || r.ptr != hex.data() + 2) error(t, "bad \\x escape");
        advance();
        advance();
        out += static_cast<char>(v);
        break;
      }
      default: error(t, str_cat("unknown escape \\", e));
    }
  }
}

std::string Lexer::punct(const Token& t) {
  static const char* two[] = {"==", "!=", "<=", ">=", "<<", ">>"};
  for (const char* p : two) {
    if (s_.compare(pos_, 2, p) == 0) {
      advance();
      advance();
      return p;
    }
  }
  static const std::string one = "()[]{},:=<>+-*/%&|^!~";
  if (one.find(s_[pos_]) == std::string::npos) error(t, str_cat("unexpected character '", s_[pos_], "'"));
  std::string p(1, s_[pos_]);
  advance();
  return p;
}

// Splits "1.5f32" into the number and its type suffix.
std::pair<std::string, std::string> split_suffix(const std::string& text) {
  const bool hex = text.rfind("0x", 0) == 0;
  size_t i = hex ? text.find_first_of("pP") : 0;
  if (i == std::string::npos) return {text, ""};
  for (; i < text.size(); ++i) {
    char c = text[i];
    bool exp_letter = !hex && (c == 'e' || c == 'E');
    if (std::isalpha(static_cast<unsigned char>(c)) && !exp_letter && !(hex && (c == 'p' || c == 'P'))) break;
  }
  return {text.substr(0, i), text.substr(i)};
}

}  // namespace tessel::loop::loop_parser
