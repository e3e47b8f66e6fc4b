#include "tessel/loop/affine.h"

#include <functional>
#include <numeric>
#include <set>
#include <utility>

#include "tessel/loop/printer.h"
#include "tessel/loop/visit.h"

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

// A subexpression over var = run * w + d as A + c * d, A a multiple of m
// (m = 0: A is 0) that does not depend on d.
struct RunForm {
  int64_t c = 0, m = 1;
};

class RunAnalysis {
 public:
  RunAnalysis(const std::string& var, int64_t run) : var_(var), run_(run) {}

  std::optional<RunForm> form(const Expr& e) const {
    switch (e->kind) {
      case ExprKind::IntImm: return RunForm{0, e->int_value < 0 ? -e->int_value : e->int_value};
      case ExprKind::Var: return e->name == var_ ? RunForm{1, run_} : RunForm{0, 1};
      case ExprKind::Unary:
        if (e->unary == UnaryOp::Neg) {
          const auto a = form(e->args[0]);
          if (a) return RunForm{-a->c, a->m};
        }
        break;
      case ExprKind::Binary: return binary(e);
      default: break;
    }
    // Anything else is an integer that does not depend on d, or unknown.
    return mentions_var(e, var_) ? std::nullopt : std::optional<RunForm>(RunForm{0, 1});
  }

 private:
  std::optional<RunForm> binary(const Expr& e) const {
    const Expr &a = e->args[0], &b = e->args[1];
    const BinaryOp op = e->binary;
    if (op == BinaryOp::FloorDiv || op == BinaryOp::FloorMod) {
      if (b->kind != ExprKind::IntImm || b->int_value <= 0) return opaque(e);
      return div_mod(op, a, b->int_value);
    }
    if (op != BinaryOp::Add && op != BinaryOp::Sub && op != BinaryOp::Mul) return opaque(e);
    const auto x = form(a), y = form(b);
    if (!x || !y) return std::nullopt;
    if (op == BinaryOp::Mul) {
      // A product keeps the form when one side is a constant q: q A + q c d.
      if (x->c != 0 && y->c != 0) return std::nullopt;
      if (x->c == 0 && y->c == 0) return RunForm{0, x->m * y->m};
      const RunForm& f = x->c != 0 ? *x : *y;
      const Expr& q = x->c != 0 ? b : a;
      if (q->kind != ExprKind::IntImm) return std::nullopt;
      const int64_t k = q->int_value;
      return RunForm{f.c * k, f.m * (k < 0 ? -k : k)};
    }
    return RunForm{op == BinaryOp::Add ? x->c + y->c : x->c - y->c, std::gcd(x->m, y->m)};
  }

  // floor((A + c d) / D) = floor(A / D) and floormod(A + c d, D) =
  // floormod(A, D) + c d when A mod D + c (run - 1) < D for every A, i.e.
  // c (run - 1) < gcd(m, D) (A mod D is a multiple of that gcd).
  std::optional<RunForm> div_mod(BinaryOp op, const Expr& a, int64_t d) const {
    const auto x = form(a);
    if (!x) return std::nullopt;
    const int64_t g = std::gcd(x->m, d);
    if (x->c != 0 && (x->c < 0 || x->c * (run_ - 1) >= g)) return std::nullopt;
    if (op == BinaryOp::FloorMod) return RunForm{x->c, g};
    return RunForm{0, x->m % d == 0 ? x->m / d : 1};
  }

  std::optional<RunForm> opaque(const Expr& e) const {
    return mentions_var(e, var_) ? std::nullopt : std::optional<RunForm>(RunForm{0, 1});
  }

  const std::string& var_;
  int64_t run_;
};

}  // namespace

bool contiguous_runs(const Expr& e, const std::string& var, int64_t run) {
  if (run < 1) return false;
  const std::optional<RunForm> f = RunAnalysis(var, run).form(e);
  return f && f->c == 1 && f->m % run == 0;
}

namespace {

Expr affine_expr(const Affine& f, DType t) {
  Expr sum = int_imm(t, f.constant);
  for (const auto& [v, c] : f.coef) sum = sum + var(v, t) * int_imm(t, c);
  return sum;
}

bool vars_of_type(const Expr& e, DType t) {
  bool same = true;
  visit_expr(e, [&](const Expr& x) { same = same && (x->kind != ExprKind::Var || x.dtype() == t); });
  return same;
}

// x = m a + r with r's range inside [0, m) (m > 0): a's terms are x's
// multiples of m; nullopt when a term that is not has no range.
std::optional<std::pair<Affine, Affine>> split_multiples(const Affine& x, int64_t m, const Bounds& bounds) {
  Affine a, r;
  a.constant = x.constant >= 0 ? x.constant / m : -((-x.constant + m - 1) / m);
  r.constant = x.constant - a.constant * m;
  int64_t lo = r.constant, hi = r.constant;
  for (const auto& [v, c] : x.coef) {
    if (c % m == 0) {
      a.coef[v] = c / m;
      continue;
    }
    const auto it = bounds.find(v);
    if (it == bounds.end()) return std::nullopt;
    r.coef[v] = c;
    lo += c > 0 ? c * it->second.lo : c * it->second.hi;
    hi += c > 0 ? c * it->second.hi : c * it->second.lo;
  }
  if (lo < 0 || hi >= m) return std::nullopt;
  return std::pair{a, r};
}

// floordiv / floormod(x, d) for x = m a + r with m dividing d and r's range
// inside [0, m): floordiv(x, d) = floordiv(a, d / m) and floormod(x, d) =
// floormod(a, d / m) m + r. With m = d: a and r themselves (a reshape's
// floordiv(49 x + j, 49) => x). With a smaller m, a K block of a
// convolution's reduction: floormod(128 pc + k, 512) => floormod(pc, 4) 128
// + k for k in [0, 128), which leaves the block's loop over k free of
// divisions. The largest such m is taken.
std::optional<Expr> div_mod_by_factor(const Expr& e, const Bounds& bounds) {
  const Expr &x = e->args[0], &dv = e->args[1];
  if (dv->kind != ExprKind::IntImm || dv->int_value <= 0 || !vars_of_type(x, e.dtype())) return std::nullopt;
  const std::optional<Affine> f = affine_form(x);
  if (!f) return std::nullopt;
  const int64_t d = dv->int_value;
  std::set<int64_t, std::greater<>> factors{d};
  for (const auto& [v, c] : f->coef)
    if (std::gcd(c, d) > 1) factors.insert(std::gcd(c, d));
  const DType t = e.dtype();
  for (int64_t m : factors) {
    const auto split = split_multiples(*f, m, bounds);
    if (!split) continue;
    const auto& [a, r] = *split;
    if (m == d) return affine_expr(e->binary == BinaryOp::FloorDiv ? a : r, t);
    const Expr outer = int_imm(t, d / m);
    if (e->binary == BinaryOp::FloorDiv) return fold_affine(floordiv(affine_expr(a, t), outer), bounds);
    return fold_affine(floormod(affine_expr(a, t), outer), bounds) * int_imm(t, m) + affine_expr(r, t);
  }
  return std::nullopt;
}

// For positive constants a and b (floor division):
//   floordiv(floordiv(y, a), b) = floordiv(y, a * b), one division fewer;
//   floormod(floordiv(y, a), b) = floordiv(floormod(y, a * b), a), taken
//   where floormod(y, a * b) resolves (a grouped-query head split out of a
//   flattened [batch, head] index).
std::optional<Expr> nested_div(const Expr& e, const Bounds& bounds) {
  const Expr &x = e->args[0], &bv = e->args[1];
  if (x->kind != ExprKind::Binary || x->binary != BinaryOp::FloorDiv || bv->kind != ExprKind::IntImm ||
      bv->int_value <= 0 || x->args[1]->kind != ExprKind::IntImm || x->args[1]->int_value <= 0)
    return std::nullopt;
  int64_t ab = 0;
  if (__builtin_mul_overflow(x->args[1]->int_value, bv->int_value, &ab)) return std::nullopt;
  const Expr &y = x->args[0], &a = x->args[1];
  const Expr whole = int_imm(e.dtype(), ab);
  if (e->binary == BinaryOp::FloorDiv) return fold_affine(floordiv(y, whole), bounds);
  const Expr r = fold_affine(floormod(y, whole), bounds);
  if (r->kind == ExprKind::Binary && r->binary == BinaryOp::FloorMod) return std::nullopt;
  return fold_affine(floordiv(r, a), bounds);
}

}  // namespace

Expr fold_affine(const Expr& e, const Bounds& bounds) {
  if (e->kind == ExprKind::Binary && is_int(e.dtype())) {
    const BinaryOp op = e->binary;
    if ((op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul) && vars_of_type(e, e.dtype())) {
      if (const std::optional<Affine> f = affine_form(e)) return affine_expr(*f, e.dtype());
    }
    if (op == BinaryOp::FloorDiv || op == BinaryOp::FloorMod) {
      const Expr inner = with_args(e, {fold_affine(e->args[0], bounds), e->args[1]});
      if (std::optional<Expr> r = div_mod_by_factor(inner, bounds)) return *r;
      if (std::optional<Expr> r = nested_div(inner, bounds)) return *r;
      return inner;
    }
  }
  return map_args(e, [&](const Expr& a) { return fold_affine(a, bounds); });
}

std::optional<Expr> constant_flat_index(const Buffer& b, const std::vector<Expr>& indices) {
  if (b.shape.size() != indices.size()) return std::nullopt;
  Expr flat(0);
  int64_t stride = 1;
  for (size_t d = b.shape.size(); d-- > 0;) {
    flat = flat + indices[d] * Expr(stride);
    int64_t dim = 0;  // the leading dim sets no stride
    if (d > 0 && (!as_const_int(simplify(b.shape[d]), &dim) || __builtin_mul_overflow(stride, dim, &stride)))
      return std::nullopt;
  }
  return flat;
}

std::optional<Affine> affine_form(const Expr& e) {
  Collector c;
  if (!c.add(e, 1) || !c.fold_pairs()) return std::nullopt;
  for (auto it = c.form.coef.begin(); it != c.form.coef.end();) it = it->second == 0 ? c.form.coef.erase(it) : std::next(it);
  return c.form;
}

}  // namespace tessel::loop
