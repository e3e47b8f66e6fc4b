#include "tessel/loop/affine.h"

#include "tessel/loop/printer.h"

namespace tessel::loop {

namespace {

// floordiv(x, d) and floormod(x, d) seen in a sum, with their coefficients.
struct DivMod {
  Expr x;
  int64_t d = 1, div_coef = 0, mod_coef = 0;
};

struct Collector {
  Affine form;
  std::map<std::string, DivMod> pairs;  // keyed by x's text and d

  bool add(const Expr& e, int64_t scale) {
    switch (e->kind) {
      case ExprKind::IntImm: form.constant += scale * e->int_value; return true;
      case ExprKind::Var: form.coef[e->name] += scale; return true;
      case ExprKind::Unary: return e->unary == UnaryOp::Neg && add(e->args[0], -scale);
      case ExprKind::Binary: return add_binary(e, scale);
      default: return false;
    }
  }

  bool add_binary(const Expr& e, int64_t scale) {
    const Expr &a = e->args[0], &b = e->args[1];
    switch (e->binary) {
      case BinaryOp::Add: return add(a, scale) && add(b, scale);
      case BinaryOp::Sub: return add(a, scale) && add(b, -scale);
      case BinaryOp::Mul:
        if (b->kind == ExprKind::IntImm) return add(a, scale * b->int_value);
        if (a->kind == ExprKind::IntImm) return add(b, scale * a->int_value);
        return false;
      case BinaryOp::FloorDiv:
      case BinaryOp::FloorMod: {
        if (b->kind != ExprKind::IntImm || b->int_value <= 0) return false;
        DivMod& p = pairs[print(a) + " / " + std::to_string(b->int_value)];
        p.x = a;
        p.d = b->int_value;
        (e->binary == BinaryOp::FloorDiv ? p.div_coef : p.mod_coef) += scale;
        return true;
      }
      default: return false;
    }
  }

  // c * d * floordiv(x, d) + c * floormod(x, d) = c * x; anything else left
  // over is not affine.
  bool fold_pairs() {
    while (!pairs.empty()) {
      const DivMod p = pairs.begin()->second;
      pairs.erase(pairs.begin());
      if (p.div_coef == 0 && p.mod_coef == 0) continue;
      if (p.div_coef != p.mod_coef * p.d || !add(p.x, p.mod_coef)) return false;
    }
    return true;
  }
};

}  // namespace

std::optional<Affine> affine_form(const Expr& e) {
  Collector c;
  if (!c.add(e, 1) || !c.fold_pairs()) return std::nullopt;
  for (auto it = c.form.coef.begin(); it != c.form.coef.end();) it = it->second == 0 ? c.form.coef.erase(it) : std::next(it);
  return c.form;
}

}  // namespace tessel::loop
