#include "tessel/loop/parser.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "tessel/loop/printer.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::loop {

namespace {

constexpr const char* kParseError = "loop IR parse error";

enum class Tok { Ident, Param, Number, String, Punct, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier / number text / decoded string / punctuation
  int line = 1, col = 1;
};

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) {}

  std::vector<Token> run() {
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

  [[noreturn]] static void error(const Token& t, const std::string& what) {
    fail(kParseError, " at ", t.line, ":", t.col, ": ", what);
  }

 private:
  void advance() {
    if (s_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void skip_space() {
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
  std::string take_while(Pred p) {
    size_t b = pos_;
    while (pos_ < s_.size() && p(s_[pos_])) advance();
    return s_.substr(b, pos_ - b);
  }

  // Digits, '.', letters (hex digits, exponent, type suffix) and a sign
  // right after an exponent letter ('e' in decimal, 'p' in hex).
  std::string number() {
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

  std::string string_literal(const Token& t) {
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

  std::string punct(const Token& t) {
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

  const std::string& s_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

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

class Parser {
 public:
  explicit Parser(const std::string& text) : toks_(Lexer(text).run()) {}

  Kernel kernel() {
    Kernel k;
    expect_word("kernel");
    k.name = ident("a kernel name");
    expect("(");
    parse_params(k);
    if (accept_word("syms")) {
      expect("(");
      if (!accept(")")) {
        do {
          k.syms.push_back(ident("a symbol name"));
          declare_var(k.syms.back(), DType::I64);
        } while (accept(","));
        expect(")");
      }
    }
    // Param shapes may mention syms declared after them.
    for (auto& [b, shape] : pending_shapes_) b->shape = exprs_from(shape);
    expect("{");
    k.body = block();
    if (peek().kind != Tok::End) Lexer::error(peek(), "unexpected text after the kernel");
    return k;
  }

  // One expression over i64 variables (no buffers).
  Expr standalone_expr(const std::vector<std::string>& i64_vars) {
    for (const std::string& v : i64_vars) declare_var(v, DType::I64);
    Expr e = expr();
    if (peek().kind != Tok::End) error(str_cat("unexpected ", found(), " after the expression"));
    return e;
  }

 private:
  // ---- token helpers ----
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is(const char* p, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::Punct && peek(ahead).text == p;
  }
  bool is_word(const char* w, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::Ident && peek(ahead).text == w;
  }
  bool accept(const char* p) {
    if (!is(p)) return false;
    next();
    return true;
  }
  bool accept_word(const char* w) {
    if (!is_word(w)) return false;
    next();
    return true;
  }
  [[noreturn]] void error(const std::string& what) const { Lexer::error(peek(), what); }
  std::string found() const { return peek().kind == Tok::End ? "end of input" : "'" + peek().text + "'"; }
  void expect(const char* p) {
    if (!accept(p)) error(str_cat("expected '", p, "', found ", found()));
  }
  void expect_word(const char* w) {
    if (!accept_word(w)) error(str_cat("expected '", w, "', found ", found()));
  }
  std::string ident(const char* what) {
    if (peek().kind != Tok::Ident) error(str_cat("expected ", what, ", found ", found()));
    return next().text;
  }
  DType dtype() {
    std::string n = ident("a type");
    DType t;
    if (!dtype_from_name(n, &t)) Lexer::error(toks_[pos_ - 1], str_cat("unknown type '", n, "'"));
    return t;
  }

  // ---- scopes ----
  void declare_var(const std::string& n, DType t) { vars_.emplace_back(n, t); }
  void declare_buffer(const BufferRef& b) { buffers_.push_back(b); }

  std::optional<DType> lookup_var(const std::string& n) const {
    for (auto it = vars_.rbegin(); it != vars_.rend(); ++it)
      if (it->first == n) return it->second;
    return std::nullopt;
  }
  BufferRef lookup_buffer(const std::string& n) const {
    for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it)
      if ((*it)->name == n) return *it;
    return nullptr;
  }

  // ---- declarations ----
  // "%name: dtype[shape]"; the shape is parsed later when `defer_shape`.
  BufferRef buffer_decl(BufferScope scope, bool defer_shape) {
    if (peek().kind != Tok::Param) error(str_cat("expected a %buffer name, found ", found()));
    auto b = std::make_shared<Buffer>();
    b->name = next().text;
    b->scope = scope;
    expect(":");
    b->dtype = dtype();
    expect("[");
    if (defer_shape) {
      pending_shapes_.emplace_back(b, skip_until_bracket());
    } else if (!accept("]")) {
      b->shape = expr_list();
      expect("]");
    }
    return b;
  }

  // Remembers the token range of a param's shape: syms come after params.
  std::pair<size_t, size_t> skip_until_bracket() {
    size_t b = pos_;
    int depth = 0;
    while (!(depth == 0 && is("]"))) {
      if (peek().kind == Tok::End) error("unterminated shape");
      if (is("[") || is("(")) ++depth;
      if (is(")")) --depth;
      if (is("]")) --depth;
      next();
    }
    size_t e = pos_;
    next();
    return {b, e};
  }

  std::vector<Expr> exprs_from(std::pair<size_t, size_t> range) {
    size_t saved = pos_;
    pos_ = range.first;
    std::vector<Expr> out;
    if (pos_ != range.second) out = expr_list();
    if (pos_ != range.second) error("unexpected text in a shape");
    pos_ = saved;
    return out;
  }

  void parse_params(Kernel& k) {
    bool seen_out = false;
    if (accept(")")) return;
    do {
      bool in = accept_word("in");
      if (!in) expect_word("out");
      if (in && seen_out) error("inputs must come before outputs");
      seen_out = seen_out || !in;
      BufferRef b = buffer_decl(BufferScope::Param, true);
      if (lookup_buffer(b->name)) error(str_cat("duplicate buffer %", b->name));
      k.params.push_back(b);
      if (in) ++k.num_inputs;
      declare_buffer(b);
    } while (accept(","));
    expect(")");
  }

  // ---- statements ----
  // Statements up to the closing '}', which it consumes.
  Stmt block() {
    std::vector<Stmt> stmts;
    while (!accept("}")) {
      if (peek().kind == Tok::End) error("expected '}'");
      stmts.push_back(statement());
    }
    return stmts.size() == 1 ? stmts[0] : seq(std::move(stmts));
  }

  // A Let/Allocate body: a braced block, or the rest of the enclosing block.
  Stmt scoped_body() {
    if (accept("{")) return block();
    Stmt rest = block();
    --pos_;  // leave the enclosing block's '}' for it
    return rest;
  }

  Stmt statement() {
    const Token& t = peek();
    if (accept("{")) return block();
    if (t.kind != Tok::Ident) error(str_cat("expected a statement, found ", found()));
    if (t.text == "let") return let_stmt();
    if (t.text == "allocate") return allocate_stmt();
    if (t.text == "if") return if_stmt();
    if (t.text == "assert") return assert_stmt();
    if (t.text == "contract" && peek(1).kind == Tok::Ident) return contract_stmt();
    if (t.text == "attention" && peek(1).kind == Tok::Ident) return attention_stmt();
    if (t.text == "for" || is_word("for", 1)) return for_stmt();
    return store_stmt();
  }

  Stmt let_stmt() {
    next();
    std::string v = ident("a variable name");
    expect("=");
    Expr value = expr();
    size_t mark = vars_.size();
    declare_var(v, value.dtype());
    Stmt body = scoped_body();
    vars_.resize(mark);
    return let(v, value, body);
  }

  Stmt allocate_stmt() {
    next();
    const Token& at = peek();
    BufferRef b = buffer_decl(BufferScope::Local, false);
    std::string scope = ident("'local' or 'shared'");
    if (scope == "shared") {
      b->scope = BufferScope::Shared;
    } else if (scope != "local") {
      Lexer::error(at, "allocate scope must be 'local' or 'shared'");
    }
    size_t mark = buffers_.size();
    declare_buffer(b);
    Stmt body = scoped_body();
    buffers_.resize(mark);
    return allocate(b, body);
  }

  Stmt if_stmt() {
    next();
    Expr cond = expr();
    expect("{");
    Stmt then_s = block();
    Stmt else_s;
    if (accept_word("else")) {
      expect("{");
      else_s = block();
    }
    return if_then(cond, then_s, else_s);
  }

  Stmt assert_stmt() {
    next();
    Expr cond = expr();
    expect(",");
    if (peek().kind != Tok::String) error(str_cat("expected a quoted message, found ", found()));
    return assert_that(cond, next().text);
  }

  // `name in [0, extent)`, n of them comma-separated (a contract's or an
  // attention's variables).
  void ranges(size_t n, const std::string& kind, std::string* names, Expr* extents) {
    const std::string variable = str_cat(kind == "attention" ? "an " : "a ", kind, " variable");
    for (size_t d = 0; d < n; ++d) {
      if (d) expect(",");
      names[d] = ident(variable.c_str());
      expect_word("in");
      expect("[");
      if (!is_const(expr(), 0)) error(str_cat(kind, " ranges start at 0"));
      expect(",");
      extents[d] = expr();
      expect(")");
    }
  }

  // `: acc = fn(` after a statement's ranges: the accumulator's name; the
  // range variables are declared (from `mark` on) for the operands.
  std::string accumulator_call(const char* fn, const std::string* names, size_t n) {
    expect(":");
    std::string acc = ident("the accumulator's name");
    expect("=");
    expect_word(fn);
    expect("(");
    for (size_t d = 0; d < n; ++d) declare_var(names[d], DType::I64);
    return acc;
  }

  // `{ epilogue }`, which sees the `visible` range variables and acc.
  Stmt epilogue_block(size_t mark, const std::string* names, std::initializer_list<size_t> visible,
                      const std::string& acc) {
    vars_.resize(mark);
    for (size_t d : visible) declare_var(names[d], DType::I64);
    declare_var(acc, DType::F32);
    expect("{");
    Stmt epilogue = block();
    vars_.resize(mark);
    return epilogue;
  }

  // attention b in [0, B), i in [0, M), j in [0, N), d in [0, D), e in [0, E):
  //     acc = softmax_dot(q, k, v, scale, bias, p_type) { epilogue }
  Stmt attention_stmt() {
    const Token& at = next();
    std::string names[5];
    Expr extents[5];
    ranges(5, "attention", names, extents);
    const size_t mark = vars_.size();
    const std::string acc = accumulator_call("softmax_dot", names, 5);
    Expr operands[5];
    for (Expr& e : operands) {
      e = expr();
      expect(",");
    }
    const DType p_type = dtype();
    expect(")");
    const Stmt epilogue = epilogue_block(mark, names, {0, 1, 4}, acc);
    try {
      return attention({names[0], names[1], names[2], names[3], names[4], acc}, extents[0], extents[1], extents[2],
                       extents[3], extents[4], operands[0], operands[1], operands[2], operands[3], operands[4],
                       p_type, epilogue);
    } catch (const Error& e) {
      Lexer::error(at, e.what());
    }
  }

  // contract b in [0, B), i in [0, M), j in [0, N), k in [0, K): acc = dot(a, b) { epilogue }
  Stmt contract_stmt() {
    const Token& at = next();
    std::string names[4];
    Expr extents[4];
    ranges(4, "contract", names, extents);
    const size_t mark = vars_.size();
    const std::string acc = accumulator_call("dot", names, 4);
    const Expr a = expr();
    expect(",");
    const Expr b = expr();
    expect(")");
    const Stmt epilogue = epilogue_block(mark, names, {0, 1, 2}, acc);
    try {
      return contract({names[0], names[1], names[2], names[3], acc}, extents[0], extents[1], extents[2], extents[3],
                      a, b, epilogue);
    } catch (const Error& e) {
      Lexer::error(at, e.what());
    }
  }

  ForKind for_kind() {
    if (is_word("for")) return ForKind::Serial;
    const Token& t = next();
    for (ForKind k : all_for_kinds())
      if (t.text == for_kind_name(k)) return k;
    Lexer::error(t, str_cat("unknown loop kind '", t.text, "'"));
  }

  Stmt for_stmt() {
    ForKind kind = for_kind();
    expect_word("for");
    std::string v = ident("a loop variable");
    expect_word("in");
    expect("[");
    Expr lo = expr();
    expect(",");
    Expr hi = expr();
    expect(")");
    // The printer writes the end as `min + extent` (just `extent` from 0).
    Expr extent = is_const(lo, 0) ? hi
                  : hi->kind == ExprKind::Binary && hi->binary == BinaryOp::Add && equal(hi->args[0], lo)
                      ? hi->args[1]
                      : hi - lo;
    expect("{");
    size_t mark = vars_.size();
    declare_var(v, DType::I64);
    Stmt body = block();
    vars_.resize(mark);
    return for_loop(v, lo, extent, kind, body);
  }

  Stmt store_stmt() {
    const Token& t = peek();
    BufferRef b = buffer_ref(ident("a statement"), t);
    expect("[");
    std::vector<Expr> idx;
    if (!accept("]")) {
      idx = expr_list();
      expect("]");
    }
    expect("=");
    Expr value = expr();
    return store(b, std::move(idx), value);
  }

  BufferRef buffer_ref(const std::string& name, const Token& at) const {
    BufferRef b = lookup_buffer(name);
    if (!b) Lexer::error(at, str_cat("unknown buffer '", name, "'"));
    return b;
  }

  // ---- expressions ----
  std::vector<Expr> expr_list() {
    std::vector<Expr> out{expr()};
    while (accept(",")) out.push_back(expr());
    return out;
  }

  Expr expr() { return binary_expr(1); }

  std::optional<BinaryOp> infix_op(int prec) const {
    if (peek().kind != Tok::Punct) return std::nullopt;
    for (BinaryOp op : all_binary_ops())
      if (binary_op_precedence(op) == prec && peek().text == binary_op_spelling(op)) return op;
    return std::nullopt;
  }

  static constexpr int kMaxPrecedence = 8;

  Expr binary_expr(int prec) {
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
  Expr checked(F f) {
    const Token& at = peek();
    try {
      return f();
    } catch (const Error& e) {
      if (std::string(e.what()).rfind(kParseError, 0) == 0) throw;
      Lexer::error(at, e.what());
    }
  }

  // Nesting (parentheses, unary operators) is bounded: text from a damaged
  // or hostile artifact must give an error, not overflow the stack.
  static constexpr int kMaxNesting = 200;

  Expr unary_expr() {
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

  static bool is_special_float(const Token& t) {
    if (t.kind != Tok::Ident) return false;
    DType d;
    return (t.text.rfind("inf", 0) == 0 || t.text.rfind("nan", 0) == 0) && dtype_from_name(t.text.substr(3), &d) &&
           is_float(d);
  }

  Expr literal(const Token& t, bool negative) {
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

  static double float_value(const Token& t, const std::string& num, DType d, bool negative) {
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

  static int64_t int_value(const Token& t, const std::string& num, DType d, bool negative) {
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

  std::vector<Expr> call_args() {
    expect("(");
    std::vector<Expr> args;
    if (!accept(")")) {
      args = expr_list();
      expect(")");
    }
    return args;
  }

  DType angle_type() {
    expect("<");
    DType t = dtype();
    expect(">");
    return t;
  }

  Expr builtin(const Token& t) {
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

  Expr primary() {
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

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int nesting_ = 0;
  std::vector<std::pair<std::string, DType>> vars_;
  std::vector<BufferRef> buffers_;
  std::vector<std::pair<BufferRef, std::pair<size_t, size_t>>> pending_shapes_;
};

}  // namespace

Kernel parse_kernel(const std::string& text) { return Parser(text).kernel(); }

Expr parse_expr(const std::string& text, const std::vector<std::string>& i64_vars) {
  return Parser(text).standalone_expr(i64_vars);
}

}  // namespace tessel::loop
