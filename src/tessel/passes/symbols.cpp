#include "tessel/passes/symbols.h"

namespace tessel {

namespace {

Dim substitute_atom(const DimAtom& a, const DimSubst& s) {
  switch (a.kind) {
    case DimAtom::Kind::Symbol: {
      auto it = s.find(a.name);
      return it == s.end() ? Dim::sym(a.name) : it->second;
    }
    case DimAtom::Kind::FloorDiv: return Dim::floordiv(substitute_dim(a.args[0], s), substitute_dim(a.args[1], s));
    case DimAtom::Kind::Mod: return Dim::mod(substitute_dim(a.args[0], s), substitute_dim(a.args[1], s));
    case DimAtom::Kind::Max: return Dim::max(substitute_dim(a.args[0], s), substitute_dim(a.args[1], s));
    case DimAtom::Kind::Min: return Dim::min(substitute_dim(a.args[0], s), substitute_dim(a.args[1], s));
  }
  return Dim::sym(a.name);
}

bool mentions(const Dim& d, const DimSubst& s) {
  std::set<std::string> syms;
  d.collect_symbols(&syms);
  for (const auto& n : syms)
    if (s.count(n)) return true;
  return false;
}

}  // namespace

Dim substitute_dim(const Dim& d, const DimSubst& s) {
  if (s.empty() || d.is_const() || !mentions(d, s)) return d;
  Dim out = 0;
  for (const Dim::Term& t : d.terms()) {
    Dim term = t.coef;
    for (const auto& a : t.atoms) term = term * substitute_atom(*a, s);
    out = out + term;
  }
  return out;
}

Type substitute_type(const Type& t, const DimSubst& s) {
  if (s.empty()) return t;
  Type out = t;
  if (out.shape)
    for (Dim& d : *out.shape) d = substitute_dim(d, s);
  if (out.elem) out.elem = std::make_shared<Type>(substitute_type(*out.elem, s));
  return out;
}

void collect_type_symbols(const Type& t, std::set<std::string>* out) {
  if (t.shape)
    for (const Dim& d : *t.shape) d.collect_symbols(out);
  if (t.elem) collect_type_symbols(*t.elem, out);
}

bool is_bare_symbol(const Dim& d, std::string* name) {
  const auto& terms = d.terms();
  if (terms.size() != 1 || terms[0].coef != 1 || terms[0].atoms.size() != 1 ||
      terms[0].atoms[0]->kind != DimAtom::Kind::Symbol)
    return false;
  if (name) *name = terms[0].atoms[0]->name;
  return true;
}

bool substitute_model_types(Model& m, const DimSubst& s) {
  if (s.empty()) return false;
  bool changed = false;
  for_each_graph(*m.graph, [&](Graph& g) {
    for (const auto& v : g.values()) {
      Type t = substitute_type(v->type, s);
      if (!(t == v->type)) {
        v->type = std::move(t);
        changed = true;
      }
    }
    for (const auto& n : g.nodes())
      for (auto& [k, a] : n->attrs)
        if (a.kind == Attribute::Kind::TypeProto) {
          Type t = substitute_type(a.type, s);
          if (!(t == a.type)) {
            a.type = std::move(t);
            changed = true;
          }
        }
  });
  return changed;
}

}  // namespace tessel
