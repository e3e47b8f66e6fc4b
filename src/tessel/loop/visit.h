// Generic helpers over loop IR trees: rebuilding a node from new children,
// structural equality and hashing of expressions, substitution of variables,
// and walking every expression of a statement.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tessel/loop/ir.h"

namespace tessel::loop {

// The same node with new operands (Unary/Binary/Select/Cast/Bitcast/Load/Call),
// rebuilt through the checked constructors; returns `e` itself when the
// operands are unchanged (pointer-equal), so untouched trees stay shared.
Expr with_args(const Expr& e, std::vector<Expr> args);

// Applies `f` to every operand of `e` and rebuilds it (see with_args).
Expr map_args(const Expr& e, const std::function<Expr(const Expr&)>& f);

// Applies `fe` to every expression held directly by `s` (loop bounds, store
// indices and value, let value, if/assert condition, contract extents and
// operands), in stmt_exprs order, and `fs` to every child statement, and
// rebuilds `s`; returns `s` itself when nothing changed.
Stmt map_stmt(const Stmt& s, const std::function<Expr(const Expr&)>& fe,
              const std::function<Stmt(const Stmt&)>& fs);

// The empty statement (an empty Seq).
Stmt no_op();
bool is_no_op(const Stmt& s);

// Structural equality: same kinds, types, operators, immediates (floats
// compared bitwise), names and buffers (by identity).
bool equal(const Expr& a, const Expr& b);
size_t hash_expr(const Expr& e);

struct ExprHash {
  size_t operator()(const Expr& e) const { return hash_expr(e); }
};
struct ExprEqual {
  bool operator()(const Expr& a, const Expr& b) const { return equal(a, b); }
};

using VarMap = std::map<std::string, Expr>;

// Replaces free occurrences of the variables in `m`. Bindings (For/Let) of a
// mapped name hide it in their body. Assumes no replacement mentions a name
// bound inside `s` (the verifier's no-shadowing rule makes that hold).
Expr substitute(const Expr& e, const VarMap& m);
Stmt substitute(const Stmt& s, const VarMap& m);

// Calls `f` on every expression node of `e`, parents before children.
void visit_expr(const Expr& e, const std::function<void(const Expr&)>& f);
// Calls `fs` on every statement of `s` (pre-order) and `fe` on every
// expression root that statement holds directly.
void visit_stmt(const Stmt& s, const std::function<void(const Stmt&)>& fs,
                const std::function<void(const Expr&)>& fe);

// The expressions a statement holds directly, in a fixed order.
std::vector<Expr> stmt_exprs(const Stmt& s);
// The addends of a sum (nested Adds flattened), in order; e itself when it
// is no Add.
void collect_addends(const Expr& e, std::vector<Expr>* out);

// Every variable name mentioned or bound anywhere in `s` (and kernel syms),
// e.g. to create fresh names.
std::set<std::string> names_in(const Stmt& s);
bool mentions_var(const Expr& e, const std::string& name);

// `base`, or `base` with a number appended, not in `taken`; added to it.
std::string fresh_name(const std::string& base, std::set<std::string>* taken);
// `s` with every loop and let it binds renamed to a fresh `<name><suffix>`
// (a copy of a loop body beside the original: loop variables are unique in
// a kernel).
Stmt rename_bound(const Stmt& s, const std::string& suffix, std::set<std::string>* taken);

}  // namespace tessel::loop
