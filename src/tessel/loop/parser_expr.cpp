// The loop IR text parser's expressions: binary operators by precedence,
// unary operators, literals with their type suffixes, builtins, calls, loads
// and variables. IR constructors' type errors become parse errors.
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include "tessel/loop/parser_internal.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::loop::loop_parser {

// ---- expressions ----
std::vector<Expr> Parser::expr_list() {
  std::vector<Expr> out{expr()};
  while (accept(",")) out.push_back(expr());
  return out;
}

std::optional<BinaryOp> Parser::infix_op(int prec) const {
  if (peek().kind != Tok::Punct) return std::nullopt;
  for (BinaryOp op : all_binary_ops())
    if (binary_op_precedence(op) == prec && peek().text == binary_op_spelling(op)) return op;
  return std::nullopt;
}

Expr Parser::binary_expr(int prec) {
  if (prec > kMaxPrecedence) return unary_expr();
  Expr lhs = binary_expr(prec + 1);
  while (auto op = infix_op(prec)) {
    next();
    lhs = checked([&] { return binary(*op, lhs, binary_expr(prec + 1)); });
  }
  return lhs;
}

// Runs an IR constructor, reporting its type errors at the current token.
template <class F>
Expr Parser::checked(F f) {
  const Token& at = peek();
  try {
    return f();
  } catch (const Error& e) {
    if (std::string(e.what()).rfind(kParseError, 0) == 0) throw;
    Lexer::error(at, e.what());
  }
}

Expr Parser::unary_expr() {
  struct Depth {
    int& d;
    explicit Depth(int& depth) : d(++depth) {}
    ~Depth() { --d; }
  } depth(nesting_);
  if (nesting_ > kMaxNesting) error(str_cat("expression nested more than ", kMaxNesting, " deep"));
  if (is("-") && (peek(1).kind == Tok::Number || is_special_float(peek(1)))) {
    next();
    return literal(next(), true);
  }
  if (accept("-")) return checked([&] { return unary(UnaryOp::Neg, unary_expr()); });
  if (accept("!") || accept("~")) return checked([&] { return unary(UnaryOp::Not, unary_expr()); });
  return primary();
}

bool Parser::is_special_float(const Token& t) {
  if (t.kind != Tok::Ident) return false;
  DType d;
  return (t.text.rfind("inf", 0) == 0 || t.text.rfind("nan", 0) == 0) && dtype_from_name(t.text.substr(3), &d) &&
         is_float(d);
}

Expr Parser::literal(const Token& t, bool negative) {
  if (is_special_float(t)) {
    DType d;
    dtype_from_name(t.text.substr(3), &d);
    double v = t.text[0] == 'i' ? std::numeric_limits<double>::infinity() : std::nan("");
    return float_imm(d, negative ? -v : v);
  }
  auto [num, sfx] = split_suffix(t.text);
  DType d = DType::I64;
  if (!sfx.empty() && !dtype_from_name(sfx, &d)) Lexer::error(t, str_cat("unknown type suffix '", sfx, "'"));
  if (is_float(d)) return float_imm(d, float_value(t, num, d, negative));
  if (d == DType::Bool) Lexer::error(t, "bool literals are true/false");
  return int_imm(d, int_value(t, num, d, negative));
}

double Parser::float_value(const Token& t, const std::string& num, DType d, bool negative) {
  double v = 0;
  const char* b = num.data();
  const char* e = num.data() + num.size();
  std::from_chars_result r{};
  if (num.rfind("0x", 0) == 0) {
    r = std::from_chars(b + 2, e, v, std::chars_format::hex);
  } else if (d == DType::F64) {
    r = std::from_chars(b, e, v);
  } else {
    float f = 0;
    r = std::from_chars(b, e, f);
    v = f;
  }
  if (r.ec != std::errc() || r.ptr != e) Lexer::error(t, str_cat("bad number '", t.text, "'"));
  return negative ? -v : v;
}

int64_t Parser::int_value(const Token& t, const std::string& num, DType d, bool negative) {
  uint64_t mag = 0;
  auto r = std::from_chars(num.data(), num.data() + num.size(), mag);
  if (r.ec != std::errc() || r.ptr != num.data() + num.size()) Lexer::error(t, str_cat("bad integer '", t.text, "'"));
  if (negative) {
    if (is_unsigned_int(d) || mag > uint64_t{1} << 63) Lexer::error(t, "integer literal out of range");
    return static_cast<int64_t>(0 - mag);
  }
  if (is_signed_int(d) && mag > static_cast<uint64_t>(INT64_MAX)) Lexer::error(t, "integer literal out of range");
  return static_cast<int64_t>(mag);
}

std::vector<Expr> Parser::call_args() {
  expect("(");
  std::vector<Expr> args;
  if (!accept(")")) {
    args = expr_list();
    expect(")");
  }
  return args;
}

DType Parser::angle_type() {
  expect("<");
  DType t = dtype();
  expect(">");
  return t;
}

Expr Parser::builtin(const Token& t) {
  const std::string& n = t.text;
  if (n == "cast" || n == "bitcast") {
    DType to = angle_type();
    std::vector<Expr> a = call_args();
    if (a.size() != 1) Lexer::error(t, str_cat(n, " takes one argument"));
    return checked([&] { return n == "cast" ? cast(to, a[0]) : bitcast(to, a[0]); });
  }
  std::vector<Expr> a = call_args();
  if (n == "select") {
    if (a.size() != 3) Lexer::error(t, "select takes three arguments");
    return checked([&] { return select(a[0], a[1], a[2]); });
  }
  for (BinaryOp op : all_binary_ops()) {
    if (n != binary_op_spelling(op)) continue;
    if (a.size() != 2) Lexer::error(t, str_cat(n, " takes two arguments"));
    return checked([&] { return binary(op, a[0], a[1]); });
  }
  Lexer::error(t, str_cat("unknown builtin '", n, "'"));
}

Expr Parser::primary() {
  const Token& t = next();
  if (t.kind == Tok::Number) return literal(t, false);
  if (t.kind == Tok::Punct && t.text == "(") {
    Expr e = expr();
    expect(")");
    return e;
  }
  if (t.kind != Tok::Ident) Lexer::error(t, str_cat("expected an expression, found '", t.text, "'"));
  if (t.text == "true" || t.text == "false") return bool_imm(t.text == "true");
  if (is_special_float(t)) return literal(t, false);
  if (is_builtin_function(t.text) && (is("(") || is("<"))) return builtin(t);
  if (accept(":")) {
    DType d = dtype();
    std::vector<Expr> a = call_args();
    return checked([&] { return call(t.text, d, a); });
  }
  if (is("(")) {
    std::vector<Expr> a = call_args();
    if (a.empty()) Lexer::error(t, str_cat("call of '", t.text, "' without arguments needs a type (", t.text, ":T())"));
    return checked([&] { return call(t.text, a[0].dtype(), a); });
  }
  if (accept("[")) {
    BufferRef b = buffer_ref(t.text, t);
    std::vector<Expr> idx;
    if (!accept("]")) {
      idx = expr_list();
      expect("]");
    }
    return checked([&] { return load(b, idx); });
  }
  auto type = lookup_var(t.text);
  if (!type) Lexer::error(t, str_cat("unknown variable '", t.text, "'"));
  return var(t.text, *type);
}

}  // namespace tessel::loop::loop_parser
