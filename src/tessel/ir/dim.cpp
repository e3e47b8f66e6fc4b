#include "tessel/ir/dim.h"

#include <algorithm>
#include <cctype>

#include "tessel/support/error.h"

namespace tessel {

namespace {

bool is_ident(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return s != "floordiv" && s != "mod" && s != "max" && s != "min";
}

std::string quote_symbol(const std::string& s) {
  if (is_ident(s)) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool atoms_less(const std::vector<DimAtomPtr>& a, const std::vector<DimAtomPtr>& b) {
  // More atoms first, so that the constant term comes last when printed.
  if (a.size() != b.size()) return a.size() > b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i]->key != b[i]->key) return a[i]->key < b[i]->key;
  return false;
}

bool atoms_equal(const std::vector<DimAtomPtr>& a, const std::vector<DimAtomPtr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i]->key != b[i]->key) return false;
  return true;
}

DimAtomPtr make_atom(DimAtom::Kind k, std::string name, std::vector<Dim> args) {
  auto a = std::make_shared<DimAtom>();
  a->kind = k;
  a->name = std::move(name);
  a->args = std::move(args);
  switch (k) {
    case DimAtom::Kind::Symbol: a->key = quote_symbol(a->name); break;
    case DimAtom::Kind::FloorDiv: a->key = "floordiv("; break;
    case DimAtom::Kind::Mod: a->key = "mod("; break;
    case DimAtom::Kind::Max: a->key = "max("; break;
    case DimAtom::Kind::Min: a->key = "min("; break;
  }
  if (k != DimAtom::Kind::Symbol) a->key += a->args[0].str() + "," + a->args[1].str() + ")";
  return a;
}

int64_t py_floordiv(int64_t a, int64_t b) {
  TS_CHECK(b != 0, "division by zero in a dimension expression");
  if (a == INT64_MIN && b == -1) fail("integer overflow in a dimension expression");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) { return checked_add(a, -checked_mul(py_floordiv(a, b), b)); }

// Lower bound of a polynomial when all its atoms are symbols (>= 1) and all
// coefficients are positive; nullopt otherwise.
std::optional<int64_t> lower_bound(const Dim& d) {
  int64_t lb = 0;
  for (const auto& t : d.terms()) {
    if (t.coef < 0) return std::nullopt;
    for (const auto& a : t.atoms)
      if (a->kind != DimAtom::Kind::Symbol) return std::nullopt;
    lb = checked_add(lb, t.coef);
  }
  return lb;
}

// Exact division of a by the single-term b; nullopt when not exact.
std::optional<Dim> divide_exact(const Dim& a, const Dim& b) {
  if (b.terms().size() != 1) return std::nullopt;
  const Dim::Term& d = b.terms()[0];
  if (d.coef == 0) return std::nullopt;
  std::vector<Dim::Term> out;
  for (const auto& t : a.terms()) {
    if (t.coef % d.coef != 0) return std::nullopt;
    std::vector<DimAtomPtr> rest = t.atoms;
    for (const auto& f : d.atoms) {
      auto it = std::find_if(rest.begin(), rest.end(), [&](const DimAtomPtr& x) { return x->key == f->key; });
      if (it == rest.end()) return std::nullopt;
      rest.erase(it);
    }
    out.push_back({t.coef / d.coef, std::move(rest)});
  }
  Dim r = 0;
  for (auto& t : out) {
    Dim term = t.coef;
    for (auto& f : t.atoms) term = term * Dim::from_atom(f);
    r = r + term;
  }
  return r;
}

}  // namespace

Dim::Dim(int64_t v) {
  if (v != 0) terms_.push_back({v, {}});
}

Dim Dim::from_terms(std::vector<Term> terms) {
  for (auto& t : terms)
    std::sort(t.atoms.begin(), t.atoms.end(), [](const DimAtomPtr& a, const DimAtomPtr& b) { return a->key < b->key; });
  std::sort(terms.begin(), terms.end(), [](const Term& a, const Term& b) { return atoms_less(a.atoms, b.atoms); });
  Dim d;
  d.terms_.clear();
  for (auto& t : terms) {
    if (!d.terms_.empty() && atoms_equal(d.terms_.back().atoms, t.atoms)) {
      d.terms_.back().coef = checked_add(d.terms_.back().coef, t.coef);
    } else {
      d.terms_.push_back(std::move(t));
    }
  }
  std::erase_if(d.terms_, [](const Term& t) { return t.coef == 0; });
  return d;
}

Dim Dim::sym(const std::string& name) {
  TS_CHECK(!name.empty(), "empty symbol name");
  Dim d;
  d.terms_ = {{1, {make_atom(DimAtom::Kind::Symbol, name, {})}}};
  return d;
}

bool Dim::is_const() const { return terms_.empty() || (terms_.size() == 1 && terms_[0].atoms.empty()); }

int64_t Dim::value() const { return terms_.empty() ? 0 : terms_[0].coef; }

std::optional<int64_t> Dim::const_value() const {
  if (!is_const()) return std::nullopt;
  return value();
}

std::string Dim::str() const {
  if (terms_.empty()) return "0";
  std::string out;
  for (size_t i = 0; i < terms_.size(); ++i) {
    const Term& t = terms_[i];
    std::string s;
    if (t.atoms.empty()) {
      s = std::to_string(t.coef);
    } else {
      if (t.coef == -1) s = "-";
      else if (t.coef != 1) s = std::to_string(t.coef) + "*";
      for (size_t j = 0; j < t.atoms.size(); ++j) s += (j ? "*" : "") + t.atoms[j]->key;
    }
    if (i > 0 && s[0] != '-') out += "+";
    out += s;
  }
  return out;
}

Dim operator+(const Dim& a, const Dim& b) {
  std::vector<Dim::Term> t = a.terms_;
  t.insert(t.end(), b.terms_.begin(), b.terms_.end());
  return Dim::from_terms(std::move(t));
}

Dim operator-(const Dim& a) {
  std::vector<Dim::Term> t = a.terms_;
  for (auto& x : t) x.coef = checked_mul(x.coef, -1);
  return Dim::from_terms(std::move(t));
}

Dim operator-(const Dim& a, const Dim& b) { return a + (-b); }

Dim operator*(const Dim& a, const Dim& b) {
  std::vector<Dim::Term> t;
  for (const auto& x : a.terms_)
    for (const auto& y : b.terms_) {
      Dim::Term p{checked_mul(x.coef, y.coef), x.atoms};
      p.atoms.insert(p.atoms.end(), y.atoms.begin(), y.atoms.end());
      t.push_back(std::move(p));
    }
  return Dim::from_terms(std::move(t));
}

Dim Dim::floordiv(const Dim& a, const Dim& b) {
  if (a.is_const() && b.is_const()) return py_floordiv(a.value(), b.value());
  TS_CHECK(!(b.is_const() && b.value() == 0), "division by zero in a dimension expression");
  if (auto q = divide_exact(a, b)) return *q;
  Dim d;
  d.terms_ = {{1, {make_atom(DimAtom::Kind::FloorDiv, "", {a, b})}}};
  return d;
}

Dim Dim::ceildiv(const Dim& a, const Dim& b) { return -floordiv(-a, b); }

Dim Dim::mod(const Dim& a, const Dim& b) {
  if (a.is_const() && b.is_const()) return py_mod(a.value(), b.value());
  TS_CHECK(!(b.is_const() && b.value() == 0), "division by zero in a dimension expression");
  if (divide_exact(a, b)) return 0;
  Dim d;
  d.terms_ = {{1, {make_atom(DimAtom::Kind::Mod, "", {a, b})}}};
  return d;
}

Dim Dim::from_atom(DimAtomPtr a) {
  Dim d;
  d.terms_ = {{1, {std::move(a)}}};
  return d;
}

namespace {
Dim minmax(const Dim& a, const Dim& b, bool is_max) {
  if (a == b) return a;
  Dim diff = a - b;
  if (diff.is_const()) return (diff.value() > 0) == is_max ? a : b;
  // A constant against a sum of symbols (each >= 1) with a known lower bound.
  if (a.is_const() || b.is_const()) {
    const Dim& c = a.is_const() ? a : b;
    const Dim& p = a.is_const() ? b : a;
    if (auto lb = lower_bound(p); lb && c.value() <= *lb) return is_max ? p : c;
  }
  Dim x = a, y = b;
  if (y < x) std::swap(x, y);
  return Dim::from_atom(make_atom(is_max ? DimAtom::Kind::Max : DimAtom::Kind::Min, "", {x, y}));
}
}  // namespace

Dim Dim::max(const Dim& a, const Dim& b) { return minmax(a, b, true); }
Dim Dim::min(const Dim& a, const Dim& b) { return minmax(a, b, false); }

bool operator==(const Dim& a, const Dim& b) {
  if (a.terms_.size() != b.terms_.size()) return false;
  for (size_t i = 0; i < a.terms_.size(); ++i)
    if (a.terms_[i].coef != b.terms_[i].coef || !atoms_equal(a.terms_[i].atoms, b.terms_[i].atoms)) return false;
  return true;
}

bool operator<(const Dim& a, const Dim& b) {
  for (size_t i = 0; i < a.terms_.size() && i < b.terms_.size(); ++i) {
    const auto& x = a.terms_[i];
    const auto& y = b.terms_[i];
    if (atoms_less(x.atoms, y.atoms)) return true;
    if (atoms_less(y.atoms, x.atoms)) return false;
    if (x.coef != y.coef) return x.coef < y.coef;
  }
  return a.terms_.size() < b.terms_.size();
}

namespace {
Dim atom_substitute(const DimAtom& a, const std::map<std::string, int64_t>& env) {
  switch (a.kind) {
    case DimAtom::Kind::Symbol: {
      auto it = env.find(a.name);
      return it == env.end() ? Dim::sym(a.name) : Dim(it->second);
    }
    case DimAtom::Kind::FloorDiv: return Dim::floordiv(a.args[0].substitute(env), a.args[1].substitute(env));
    case DimAtom::Kind::Mod: return Dim::mod(a.args[0].substitute(env), a.args[1].substitute(env));
    case DimAtom::Kind::Max: return Dim::max(a.args[0].substitute(env), a.args[1].substitute(env));
    case DimAtom::Kind::Min: return Dim::min(a.args[0].substitute(env), a.args[1].substitute(env));
  }
  return Dim(0);
}
}  // namespace

Dim Dim::substitute(const std::map<std::string, int64_t>& env) const {
  Dim r = 0;
  for (const auto& t : terms_) {
    Dim p = t.coef;
    for (const auto& a : t.atoms) p = p * atom_substitute(*a, env);
    r = r + p;
  }
  return r;
}

std::optional<int64_t> Dim::eval(const std::map<std::string, int64_t>& env) const {
  return substitute(env).const_value();
}

void Dim::collect_symbols(std::set<std::string>* out) const {
  for (const auto& t : terms_)
    for (const auto& a : t.atoms) {
      if (a->kind == DimAtom::Kind::Symbol) out->insert(a->name);
      for (const auto& x : a->args) x.collect_symbols(out);
    }
}

// ---- parsing ----------------------------------------------------------------

namespace {

class DimParser {
 public:
  explicit DimParser(const std::string& s) : s_(s) {}

  Dim parse_all() {
    Dim d = expr();
    skip_ws();
    if (pos_ != s_.size()) error("unexpected character");
    return d;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;

  [[noreturn]] void error(const char* what) { fail("bad dimension expression '", s_, "': ", what); }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  Dim expr() {
    Dim d = eat('-') ? -term() : term();
    for (;;) {
      if (eat('+')) d = d + term();
      else if (eat('-')) d = d - term();
      else return d;
    }
  }
  Dim term() {
    Dim d = factor();
    while (eat('*')) d = d * factor();
    return d;
  }
  Dim factor() {
    skip_ws();
    if (pos_ >= s_.size()) error("unexpected end");
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      Dim d = expr();
      if (!eat(')')) error("expected ')'");
      return d;
    }
    if (c == '-') {
      ++pos_;
      return -factor();
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])))
        v = checked_add(checked_mul(v, 10), s_[pos_++] - '0');
      return v;
    }
    if (c == '"') {
      ++pos_;
      std::string name;
      while (pos_ < s_.size() && s_[pos_] != '"') {
        if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
        name += s_[pos_++];
      }
      if (!eat('"')) error("unterminated quoted symbol");
      return Dim::sym(name);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      std::string name = s_.substr(start, pos_ - start);
      if (name == "floordiv" || name == "mod" || name == "max" || name == "min") {
        if (!eat('(')) error("expected '('");
        Dim a = expr();
        if (!eat(',')) error("expected ','");
        Dim b = expr();
        if (!eat(')')) error("expected ')'");
        if (name == "floordiv") return Dim::floordiv(a, b);
        if (name == "mod") return Dim::mod(a, b);
        if (name == "max") return Dim::max(a, b);
        return Dim::min(a, b);
      }
      return Dim::sym(name);
    }
    error("unexpected character");
  }
};

}  // namespace

Dim Dim::parse(const std::string& text) { return DimParser(text).parse_all(); }

// ---- shapes -----------------------------------------------------------------

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + s[i].str();
  return out + "]";
}

bool is_static(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_const(); });
}

std::vector<int64_t> static_dims(const Shape& s) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const auto& d : s) out.push_back(d.value());
  return out;
}

Shape shape_of(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

Dim num_elements(const Shape& s) {
  Dim n = 1;
  for (const auto& d : s) n = n * d;
  return n;
}

}  // namespace tessel
