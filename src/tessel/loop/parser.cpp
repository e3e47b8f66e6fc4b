// Parser of the loop IR text form (printer.h writes it): a recursive-descent
// parser over the tokens of parser_lexer.cpp. This file holds the kernel, its
// declarations and its statements; parser_expr.cpp the expressions.
#include "tessel/loop/parser.h"

#include "tessel/loop/parser_internal.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::loop {

namespace loop_parser {

Kernel Parser::kernel() {
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
Expr Parser::standalone_expr(const std::vector<std::string>& i64_vars) {
  for (const std::string& v : i64_vars) declare_var(v, DType::I64);
  Expr e = expr();
  if (peek().kind != Tok::End) error(str_cat("unexpected ", found(), " after the expression"));
  return e;
}

// ---- declarations ----
// "%name: dtype[shape]"; the shape is parsed later when `defer_shape`.
BufferRef Parser::buffer_decl(BufferScope scope, bool defer_shape) {
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
std::pair<size_t, size_t> Parser::skip_until_bracket() {
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

std::vector<Expr> Parser::exprs_from(std::pair<size_t, size_t> range) {
  size_t saved = pos_;
  pos_ = range.first;
  std::vector<Expr> out;
  if (pos_ != range.second) out = expr_list();
  if (pos_ != range.second) error("unexpected text in a shape");
  pos_ = saved;
  return out;
}

void Parser::parse_params(Kernel& k) {
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
Stmt Parser::block() {
  std::vector<Stmt> stmts;
  while (!accept("}")) {
    if (peek().kind == Tok::End) error("expected '}'");
    stmts.push_back(statement());
  }
  return stmts.size() == 1 ? stmts[0] : seq(std::move(stmts));
}

// A Let/Allocate body: a braced block, or the rest of the enclosing block.
Stmt Parser::scoped_body() {
  if (accept("{")) return block();
  Stmt rest = block();
  --pos_;  // leave the enclosing block's '}' for it
  return rest;
}

Stmt Parser::statement() {
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

Stmt Parser::let_stmt() {
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

Stmt Parser::allocate_stmt() {
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

Stmt Parser::if_stmt() {
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

Stmt Parser::assert_stmt() {
  next();
  Expr cond = expr();
  expect(",");
  if (peek().kind != Tok::String) error(str_cat("expected a quoted message, found ", found()));
  return assert_that(cond, next().text);
}

// `name in [0, extent)`, n of them comma-separated (a contract's or an
// attention's variables).
void Parser::ranges(size_t n, const std::string& kind, std::string* names, Expr* extents) {
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
std::string Parser::accumulator_call(const char* fn, const std::string* names, size_t n) {
  expect(":");
  std::string acc = ident("the accumulator's name");
  expect("=");
  expect_word(fn);
  expect("(");
  for (size_t d = 0; d < n; ++d) declare_var(names[d], DType::I64);
  return acc;
}

// `{ epilogue }`, which sees the `visible` range variables and acc.
Stmt Parser::epilogue_block(size_t mark, const std::string* names, std::initializer_list<size_t> visible,
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
Stmt Parser::attention_stmt() {
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
Stmt Parser::contract_stmt() {
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

ForKind Parser::for_kind() {
  if (is_word("for")) return ForKind::Serial;
  const Token& t = next();
  for (ForKind k : all_for_kinds())
    if (t.text == for_kind_name(k)) return k;
  Lexer::error(t, str_cat("unknown loop kind '", t.text, "'"));
}

Stmt Parser::for_stmt() {
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

Stmt Parser::store_stmt() {
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

BufferRef Parser::buffer_ref(const std::string& name, const Token& at) const {
  BufferRef b = lookup_buffer(name);
  if (!b) Lexer::error(at, str_cat("unknown buffer '", name, "'"));
  return b;
}

}  // namespace loop_parser

Kernel parse_kernel(const std::string& text) { return loop_parser::Parser(text).kernel(); }

Expr parse_expr(const std::string& text, const std::vector<std::string>& i64_vars) {
  return loop_parser::Parser(text).standalone_expr(i64_vars);
}

}  // namespace tessel::loop
