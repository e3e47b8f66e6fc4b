// The loop IR text parser (private to loop/): its tokens, the lexer that
// makes them, and one recursive-descent class over them, whose members live in
// three files:
//   parser_lexer.cpp  the lexer and number suffixes
//   parser.cpp        the kernel, its declarations and statements
//   parser_expr.cpp   expressions
// The token helpers and scopes stay here, inline: both halves of the grammar
// use them on every token.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessel/loop/ir.h"
#include "tessel/support/error.h"

namespace tessel::loop::loop_parser {

constexpr const char* kParseError = "loop IR parse error";

enum class Tok { Ident, Param, Number, String, Punct, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier / number text / decoded string / punctuation
  int line = 1, col = 1;
};

class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) {}

  std::vector<Token> run();

  [[noreturn]] static void error(const Token& t, const std::string& what);

 private:
  void advance();
  void skip_space();
  template <class Pred>
  std::string take_while(Pred p);
  std::string number();
  std::string string_literal(const Token& t);
  std::string punct(const Token& t);

  const std::string& s_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

// A number token split into its digits and its type suffix (parser_lexer.cpp).
std::pair<std::string, std::string> split_suffix(const std::string& text);

class Parser {
 public:
  explicit Parser(const std::string& text) : toks_(Lexer(text).run()) {}

  Kernel kernel();
  Expr standalone_expr(const std::vector<std::string>& i64_vars);

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

  // ---- declarations and statements (parser.cpp) ----
  BufferRef buffer_decl(BufferScope scope, bool defer_shape);
  std::pair<size_t, size_t> skip_until_bracket();
  std::vector<Expr> exprs_from(std::pair<size_t, size_t> range);
  void parse_params(Kernel& k);
  Stmt block();
  Stmt scoped_body();
  Stmt statement();
  Stmt let_stmt();
  Stmt allocate_stmt();
  Stmt if_stmt();
  Stmt assert_stmt();
  void ranges(size_t n, const std::string& kind, std::string* names, Expr* extents);
  std::string accumulator_call(const char* fn, const std::string* names, size_t n);
  Stmt epilogue_block(size_t mark, const std::string* names, std::initializer_list<size_t> visible,
                      const std::string& acc);
  Stmt attention_stmt();
  Stmt contract_stmt();
  ForKind for_kind();
  Stmt for_stmt();
  Stmt store_stmt();
  BufferRef buffer_ref(const std::string& name, const Token& at) const;

  // ---- expressions (parser_expr.cpp) ----
  std::vector<Expr> expr_list();
  Expr expr() { return binary_expr(1); }
  std::optional<BinaryOp> infix_op(int prec) const;

  static constexpr int kMaxPrecedence = 8;
  Expr binary_expr(int prec);
  template <class F>
  Expr checked(F f);

  // Nesting (parentheses, unary operators) is bounded: text from a damaged
  // or hostile artifact must give an error, not overflow the stack.
  static constexpr int kMaxNesting = 200;
  Expr unary_expr();
  static bool is_special_float(const Token& t);
  Expr literal(const Token& t, bool negative);
  static double float_value(const Token& t, const std::string& num, DType d, bool negative);
  static int64_t int_value(const Token& t, const std::string& num, DType d, bool negative);
  std::vector<Expr> call_args();
  DType angle_type();
  Expr builtin(const Token& t);
  Expr primary();

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int nesting_ = 0;
  std::vector<std::pair<std::string, DType>> vars_;
  std::vector<BufferRef> buffers_;
  std::vector<std::pair<BufferRef, std::pair<size_t, size_t>>> pending_shapes_;
};

}  // namespace tessel::loop::loop_parser
