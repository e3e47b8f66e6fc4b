#include "tessel/loop/visit.h"

#include <bit>
#include <cstring>

#include "tessel/support/error.h"

namespace tessel::loop {

namespace {

bool same_args(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].node != b[i].node) return false;
  return true;
}

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

}  // namespace

Expr with_args(const Expr& e, std::vector<Expr> args) {
  if (same_args(e->args, args)) return e;
  switch (e->kind) {
    case ExprKind::IntImm: case ExprKind::FloatImm: case ExprKind::Var: return e;
    case ExprKind::Unary: return unary(e->unary, args[0]);
    case ExprKind::Binary: return binary(e->binary, args[0], args[1]);
    case ExprKind::Select: return select(args[0], args[1], args[2]);
    case ExprKind::Cast: return cast(e->dtype, args[0]);
    case ExprKind::Bitcast: return bitcast(e->dtype, args[0]);
    case ExprKind::Load: return load(e->buffer, std::move(args));
    case ExprKind::Call: return call(e->name, e->dtype, std::move(args));
  }
  fail("loop IR: unknown expression kind");
}

Expr map_args(const Expr& e, const std::function<Expr(const Expr&)>& f) {
  std::vector<Expr> args;
  args.reserve(e->args.size());
  for (const Expr& a : e->args) args.push_back(f(a));
  return with_args(e, std::move(args));
}

Stmt no_op() { return seq({}); }
bool is_no_op(const Stmt& s) { return s->kind == StmtKind::Seq && s->body.empty(); }

void collect_addends(const Expr& e, std::vector<Expr>* out) {
  if (e->kind != ExprKind::Binary || e->binary != BinaryOp::Add) return out->push_back(e);
  collect_addends(e->args[0], out);
  collect_addends(e->args[1], out);
}

std::vector<Expr> stmt_exprs(const Stmt& s) {
  std::vector<Expr> out;
  switch (s->kind) {
    case StmtKind::For: out = {s->min, s->extent}; break;
    case StmtKind::Store: out = s->indices; out.push_back(s->value); break;
    case StmtKind::Let: case StmtKind::If: case StmtKind::Assert: out = {s->value}; break;
    case StmtKind::Seq: case StmtKind::Allocate: break;
    case StmtKind::Contract: case StmtKind::Attention: out = s->operands; break;
  }
  return out;
}

Stmt map_stmt(const Stmt& s, const std::function<Expr(const Expr&)>& fe,
              const std::function<Stmt(const Stmt&)>& fs) {
  std::vector<Expr> old_exprs = stmt_exprs(s);
  std::vector<Expr> exprs;
  for (const Expr& e : old_exprs) exprs.push_back(fe(e));
  std::vector<Stmt> body;
  bool changed = !same_args(old_exprs, exprs);
  for (const Stmt& b : s->body) {
    body.push_back(fs(b));
    changed = changed || body.back().node != b.node;
  }
  if (!changed) return s;
  switch (s->kind) {
    case StmtKind::For: return for_loop(s->var, exprs[0], exprs[1], s->for_kind, body[0]);
    case StmtKind::Store: {
      Expr value = exprs.back();
      exprs.pop_back();
      return store(s->buffer, std::move(exprs), value);
    }
    case StmtKind::Let: return let(s->var, exprs[0], body[0]);
    case StmtKind::If: return if_then(exprs[0], body[0], body.size() > 1 ? body[1] : Stmt());
    case StmtKind::Seq: return seq(std::move(body));
    case StmtKind::Allocate: return allocate(s->buffer, body[0]);
    case StmtKind::Assert: return assert_that(exprs[0], s->message);
    case StmtKind::Contract: {
      const ContractView c = contract_parts(*s);
      return contract({c.batch, c.i, c.j, c.k, c.acc}, exprs[0], exprs[1], exprs[2], exprs[3], exprs[4], exprs[5],
                      body[0]);
    }
    case StmtKind::Attention: {
      const AttentionView a = attention_parts(*s);
      return attention({a.batch, a.i, a.j, a.d, a.e, a.acc}, exprs[0], exprs[1], exprs[2], exprs[3], exprs[4],
                       exprs[5], exprs[6], exprs[7], exprs[8], exprs[9], a.p_type, body[0]);
    }
  }
  fail("loop IR: unknown statement kind");
}

bool equal(const Expr& a, const Expr& b) {
  if (a.node == b.node) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a->kind != b->kind || a->dtype != b->dtype || a->args.size() != b->args.size()) return false;
  switch (a->kind) {
    case ExprKind::IntImm: return a->int_value == b->int_value;
    case ExprKind::FloatImm:
      return std::bit_cast<uint64_t>(a->float_value) == std::bit_cast<uint64_t>(b->float_value);
    case ExprKind::Var: return a->name == b->name;
    case ExprKind::Unary: if (a->unary != b->unary) return false; break;
    case ExprKind::Binary: if (a->binary != b->binary) return false; break;
    case ExprKind::Select: case ExprKind::Cast: case ExprKind::Bitcast: break;
    case ExprKind::Load: if (a->buffer != b->buffer) return false; break;
    case ExprKind::Call: if (a->name != b->name) return false; break;
  }
  for (size_t i = 0; i < a->args.size(); ++i)
    if (!equal(a->args[i], b->args[i])) return false;
  return true;
}

size_t hash_expr(const Expr& e) {
  size_t h = mix(static_cast<size_t>(e->kind), static_cast<size_t>(e->dtype));
  switch (e->kind) {
    case ExprKind::IntImm: h = mix(h, static_cast<size_t>(e->int_value)); break;
    case ExprKind::FloatImm: h = mix(h, std::bit_cast<uint64_t>(e->float_value)); break;
    case ExprKind::Var: case ExprKind::Call: h = mix(h, std::hash<std::string>()(e->name)); break;
    case ExprKind::Unary: h = mix(h, static_cast<size_t>(e->unary)); break;
    case ExprKind::Binary: h = mix(h, static_cast<size_t>(e->binary)); break;
    case ExprKind::Load: h = mix(h, std::hash<const void*>()(e->buffer.get())); break;
    case ExprKind::Select: case ExprKind::Cast: case ExprKind::Bitcast: break;
  }
  for (const Expr& a : e->args) h = mix(h, hash_expr(a));
  return h;
}

Expr substitute(const Expr& e, const VarMap& m) {
  if (m.empty()) return e;
  if (e->kind == ExprKind::Var) {
    auto it = m.find(e->name);
    return it == m.end() ? e : it->second;
  }
  return map_args(e, [&](const Expr& a) { return substitute(a, m); });
}

Stmt substitute(const Stmt& s, const VarMap& m) {
  if (m.empty()) return s;
  if (s->kind == StmtKind::Contract || s->kind == StmtKind::Attention) {
    // The extents (the first 4, or 5) are outside the statement's bindings;
    // the other operands and the epilogue inside them.
    VarMap inner = m;
    for (const std::string& v : s->vars) inner.erase(v);
    const size_t extents = s->kind == StmtKind::Contract ? 4 : 5;
    size_t n = 0;
    return map_stmt(s, [&](const Expr& e) { return substitute(e, n++ < extents ? m : inner); },
                    [&](const Stmt& b) { return substitute(b, inner); });
  }
  const bool binds = (s->kind == StmtKind::For || s->kind == StmtKind::Let) && m.count(s->var);
  if (!binds) {
    return map_stmt(s, [&](const Expr& e) { return substitute(e, m); },
                    [&](const Stmt& b) { return substitute(b, m); });
  }
  VarMap inner = m;
  inner.erase(s->var);
  // The bound expressions (loop bounds, let value) are outside the binding.
  return map_stmt(s, [&](const Expr& e) { return substitute(e, m); },
                  [&](const Stmt& b) { return substitute(b, inner); });
}

void visit_expr(const Expr& e, const std::function<void(const Expr&)>& f) {
  f(e);
  for (const Expr& a : e->args) visit_expr(a, f);
}

void visit_stmt(const Stmt& s, const std::function<void(const Stmt&)>& fs,
                const std::function<void(const Expr&)>& fe) {
  fs(s);
  for (const Expr& e : stmt_exprs(s)) fe(e);
  for (const Stmt& b : s->body) visit_stmt(b, fs, fe);
}

std::set<std::string> names_in(const Stmt& s) {
  std::set<std::string> out;
  visit_stmt(
      s,
      [&](const Stmt& st) {
        if (st->kind == StmtKind::For || st->kind == StmtKind::Let) out.insert(st->var);
        out.insert(st->vars.begin(), st->vars.end());
      },
      [&](const Expr& e) {
        visit_expr(e, [&](const Expr& x) {
          if (x->kind == ExprKind::Var) out.insert(x->name);
        });
      });
  return out;
}

bool mentions_var(const Expr& e, const std::string& name) {
  bool found = false;
  visit_expr(e, [&](const Expr& x) { found = found || (x->kind == ExprKind::Var && x->name == name); });
  return found;
}

std::string fresh_name(const std::string& base, std::set<std::string>* taken) {
  std::string n = base;
  for (int i = 1; taken->count(n); ++i) n = base + std::to_string(i);
  taken->insert(n);
  return n;
}

Stmt rename_bound(const Stmt& s, const std::string& suffix, std::set<std::string>* taken) {
  if (s->kind != StmtKind::For && s->kind != StmtKind::Let)
    return map_stmt(s, [](const Expr& e) { return e; }, [&](const Stmt& c) { return rename_bound(c, suffix, taken); });
  const bool is_for = s->kind == StmtKind::For;
  const std::string n = fresh_name(s->var + suffix, taken);
  const Expr v = var(n, is_for ? DType::I64 : s->value.dtype());
  const Stmt body = rename_bound(substitute(s->body[0], {{s->var, v}}), suffix, taken);
  return is_for ? for_loop(n, s->min, s->extent, s->for_kind, body) : let(n, s->value, body);
}

}  // namespace tessel::loop
