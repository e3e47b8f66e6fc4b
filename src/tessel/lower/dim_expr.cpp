#include "tessel/lower/dim_expr.h"

#include "tessel/support/error.h"

namespace tessel {

namespace {
loop::Expr atom_to_expr(const DimAtom& a, std::set<std::string>* syms) {
  switch (a.kind) {
    case DimAtom::Kind::Symbol:
      if (syms) syms->insert(a.name);
      return loop::var(a.name);
    case DimAtom::Kind::FloorDiv: return loop::floordiv(dim_to_expr(a.args[0], syms), dim_to_expr(a.args[1], syms));
    case DimAtom::Kind::Mod: return loop::floormod(dim_to_expr(a.args[0], syms), dim_to_expr(a.args[1], syms));
    case DimAtom::Kind::Max: return loop::max(dim_to_expr(a.args[0], syms), dim_to_expr(a.args[1], syms));
    case DimAtom::Kind::Min: return loop::min(dim_to_expr(a.args[0], syms), dim_to_expr(a.args[1], syms));
  }
  fail("dim atom of unknown kind");
}
}  // namespace

loop::Expr dim_to_expr(const Dim& d, std::set<std::string>* syms) {
  loop::Expr sum;
  for (const Dim::Term& t : d.terms()) {
    loop::Expr term;
    for (const DimAtomPtr& a : t.atoms) {
      loop::Expr e = atom_to_expr(*a, syms);
      term = term.defined() ? term * e : e;
    }
    if (!term.defined())
      term = loop::Expr(t.coef);
    else if (t.coef != 1)
      term = loop::Expr(t.coef) * term;
    sum = sum.defined() ? sum + term : term;
  }
  return sum.defined() ? sum : loop::Expr(0);
}

std::vector<loop::Expr> shape_to_exprs(const Shape& s, std::set<std::string>* syms) {
  std::vector<loop::Expr> r;
  r.reserve(s.size());
  for (const Dim& d : s) r.push_back(dim_to_expr(d, syms));
  return r;
}

}  // namespace tessel
