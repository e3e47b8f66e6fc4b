// Symbolic dimensions.
//
// A Dim is an integer polynomial over atoms, kept in a canonical form so that
// two equal expressions compare equal structurally: `2*batch*seq + 1`. Atoms
// are named symbols (`batch`, `seq`, the exporter's `MatMuloutput_dim_0`) or
// operations that do not simplify into a polynomial: floordiv(a,b), mod(a,b),
// max(a,b), min(a,b). Symbols stand for sizes, so they are assumed >= 1.
//
// Text form (printed and parsed): `2*batch*seq+1`, `floordiv(seq,2)`, `-1+seq`
// never appears: terms print in canonical order with constants last.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tessel {

struct DimAtom;
using DimAtomPtr = std::shared_ptr<const DimAtom>;

class Dim {
 public:
  Dim() : Dim(int64_t{0}) {}
  Dim(int64_t v);  // NOLINT: a constant dim converts implicitly
  Dim(int v) : Dim(static_cast<int64_t>(v)) {}  // NOLINT
  static Dim sym(const std::string& name);
  static Dim from_atom(DimAtomPtr a);

  bool is_const() const;
  int64_t value() const;  // precondition: is_const()
  // Value if constant, else nullopt.
  std::optional<int64_t> const_value() const;

  std::string str() const;
  // Parses the text form; throws tessel::Error on malformed text.
  static Dim parse(const std::string& text);

  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a);
  static Dim floordiv(const Dim& a, const Dim& b);  // rounds toward -inf
  static Dim ceildiv(const Dim& a, const Dim& b);
  static Dim mod(const Dim& a, const Dim& b);       // sign of b, like Python
  static Dim max(const Dim& a, const Dim& b);
  static Dim min(const Dim& a, const Dim& b);

  friend bool operator==(const Dim& a, const Dim& b);
  friend bool operator!=(const Dim& a, const Dim& b) { return !(a == b); }
  // A total order on canonical forms (for maps and sorting).
  friend bool operator<(const Dim& a, const Dim& b);

  // Evaluates with the given symbol values; nullopt when a symbol is unbound.
  // Throws tessel::Error on overflow or division by zero.
  std::optional<int64_t> eval(const std::map<std::string, int64_t>& env) const;
  // Substitutes bound symbols, leaving the others symbolic.
  Dim substitute(const std::map<std::string, int64_t>& env) const;
  void collect_symbols(std::set<std::string>* out) const;

  // Internal representation: sum of coefficient * product-of-atoms terms,
  // sorted; the constant term has no atoms.
  struct Term {
    int64_t coef;
    std::vector<DimAtomPtr> atoms;  // sorted by key, repeated for powers
  };
  const std::vector<Term>& terms() const { return terms_; }

 private:
  std::vector<Term> terms_;
  static Dim from_terms(std::vector<Term> terms);
};

struct DimAtom {
  enum class Kind { Symbol, FloorDiv, Mod, Max, Min };
  Kind kind;
  std::string name;    // Symbol
  std::vector<Dim> args;  // the others: two operands
  std::string key;     // canonical text, used for ordering and equality
};

using Shape = std::vector<Dim>;

std::string shape_str(const Shape& s);  // "[batch,3,224,224]"
// True when every dim is constant.
bool is_static(const Shape& s);
// Concrete dims of a static shape (precondition: is_static).
std::vector<int64_t> static_dims(const Shape& s);
Shape shape_of(const std::vector<int64_t>& dims);
// Product of dims (checked when constant).
Dim num_elements(const Shape& s);

}  // namespace tessel
