// Statement rules of the simplifier (expression rules: simplify_expr.cpp).
#include "tessel/loop/simplify.h"

#include "tessel/loop/visit.h"

namespace tessel::loop {

namespace {

class StmtSimplifier {
 public:
  explicit StmtSimplifier(Bounds bounds) : bounds_(std::move(bounds)) {}

  Stmt run(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::For: return for_loop_rule(s);
      case StmtKind::Let: return let_rule(s);
      case StmtKind::If: return if_rule(s);
      case StmtKind::Seq: return seq_rule(s);
      case StmtKind::Allocate: return allocate_rule(s);
      case StmtKind::Assert: return assert_rule(s);
      case StmtKind::Store: return exprs_only(s);
      case StmtKind::Contract: return contract_rule(s);
      case StmtKind::Attention: return attention_rule(s);
    }
    return s;
  }

 private:
  Expr expr(const Expr& e) { return simplify(e, bounds_); }

  Stmt exprs_only(const Stmt& s) {
    return map_stmt(s, [&](const Expr& e) { return expr(e); }, [&](const Stmt& b) { return run(b); });
  }

  Stmt for_loop_rule(const Stmt& s) {
    Expr min = expr(s->min), extent = expr(s->extent);
    int64_t n = 0;
    const bool const_extent = as_const_int(extent, &n);
    // for i in [m, m + e) with e <= 0 => nothing
    if (const_extent && n <= 0) return no_op();
    // for i in [m, m + 1) { body } => body[i := m]
    if (const_extent && n == 1) return run(substitute(s->body[0], {{s->var, min}}));
    int64_t lo = 0;
    const bool known = const_extent && as_const_int(min, &lo);
    if (known) bounds_[s->var] = {lo, lo + n - 1};
    Stmt body = run(s->body[0]);
    bounds_.erase(s->var);
    // A loop whose body does nothing does nothing.
    if (is_no_op(body)) return no_op();
    return for_loop(s->var, min, extent, s->for_kind, body);
  }

  Stmt let_rule(const Stmt& s) {
    Expr value = expr(s->value);
    const Stmt& body = s->body[0];
    // let x = c in body => body[x := c] (c an immediate or a variable)
    const bool trivial = value->kind == ExprKind::IntImm || value->kind == ExprKind::FloatImm ||
                         value->kind == ExprKind::Var;
    if (trivial) return run(substitute(body, {{s->var, value}}));
    Interval r;
    const bool bounded = const_bounds(value, bounds_, &r);
    if (bounded) bounds_[s->var] = r;
    Stmt new_body = run(body);
    bounds_.erase(s->var);
    // let x = v in body => body when body does not use x (values are pure)
    if (!names_in(new_body).count(s->var)) return new_body;
    return let(s->var, value, new_body);
  }

  Stmt if_rule(const Stmt& s) {
    Expr cond = expr(s->value);
    int64_t c;
    // if true {a} else {b} => a ; if false {a} else {b} => b
    if (as_const_int(cond, &c)) return c ? run(s->body[0]) : s->body.size() > 1 ? run(s->body[1]) : no_op();
    Stmt then_s = run(s->body[0]);
    Stmt else_s = s->body.size() > 1 ? run(s->body[1]) : Stmt();
    if (else_s.defined() && is_no_op(else_s)) else_s = Stmt();
    // if c {} => nothing
    if (is_no_op(then_s) && !else_s.defined()) return no_op();
    return if_then(cond, then_s, else_s);
  }

  Stmt seq_rule(const Stmt& s) {
    std::vector<Stmt> out;
    for (const Stmt& b : s->body) {
      Stmt r = run(b);
      if (!is_no_op(r)) out.push_back(r);
    }
    return out.size() == 1 ? out[0] : seq(std::move(out));
  }

  Stmt allocate_rule(const Stmt& s) {
    Stmt body = run(s->body[0]);
    return is_no_op(body) ? body : allocate(s->buffer, body);
  }

  Stmt contract_rule(const Stmt& s) {
    const ContractView c = contract_parts(*s);
    const Expr extents[] = {expr(c.batch_extent), expr(c.m), expr(c.n), expr(c.k_extent)};
    const std::string* vars[] = {&c.batch, &c.i, &c.j, &c.k};
    // No output elements => nothing (an empty K still runs the epilogues).
    for (size_t d = 0; d < 3; ++d) {
      int64_t n = 0;
      if (as_const_int(extents[d], &n) && n <= 0) return no_op();
    }
    for (size_t d = 0; d < 4; ++d) {
      int64_t n = 0;
      if (as_const_int(extents[d], &n) && n > 0) bounds_[*vars[d]] = {0, n - 1};
    }
    const Expr a = expr(c.a), b = expr(c.b);
    bounds_.erase(c.k);
    Stmt epilogue = run(c.epilogue);
    for (const std::string* v : vars) bounds_.erase(*v);
    if (is_no_op(epilogue)) return no_op();
    return contract({c.batch, c.i, c.j, c.k, c.acc}, extents[0], extents[1], extents[2], extents[3], a, b, epilogue);
  }

  Stmt attention_rule(const Stmt& s) {
    const AttentionView a = attention_parts(*s);
    const Expr extents[] = {expr(a.batch_extent), expr(a.m), expr(a.n), expr(a.d_extent), expr(a.e_extent)};
    const std::string* vars[] = {&a.batch, &a.i, &a.j, &a.d, &a.e};
    // No output elements => nothing (empty keys or head dims still run the epilogues).
    for (size_t x : {0, 1, 4}) {
      int64_t n = 0;
      if (as_const_int(extents[x], &n) && n <= 0) return no_op();
    }
    for (size_t x = 0; x < 5; ++x) {
      int64_t n = 0;
      if (as_const_int(extents[x], &n) && n > 0) bounds_[*vars[x]] = {0, n - 1};
    }
    const Expr q = expr(a.q), k = expr(a.k), v = expr(a.v), scale = expr(a.scale), bias = expr(a.bias);
    bounds_.erase(a.j);
    bounds_.erase(a.d);
    Stmt epilogue = run(a.epilogue);
    for (const std::string* x : vars) bounds_.erase(*x);
    if (is_no_op(epilogue)) return no_op();
    return attention({a.batch, a.i, a.j, a.d, a.e, a.acc}, extents[0], extents[1], extents[2], extents[3], extents[4],
                     q, k, v, scale, bias, a.p_type, epilogue);
  }

  Stmt assert_rule(const Stmt& s) {
    Expr cond = expr(s->value);
    // assert true, msg => nothing
    if (is_const(cond, 1)) return no_op();
    return assert_that(cond, s->message);
  }

  Bounds bounds_;
};

}  // namespace

Stmt simplify(const Stmt& s, const Bounds& bounds) { return StmtSimplifier(bounds).run(s); }

Kernel simplify(const Kernel& k) {
  Kernel out = k;
  out.body = simplify(k.body);
  return out;
}

}  // namespace tessel::loop
