#include "tessel/loop/split_borders.h"

#include <set>

#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"

namespace tessel::loop {

namespace {

constexpr int64_t kMaxBorder = 8;

bool is_test(BinaryOp op) {
  switch (op) {
    case BinaryOp::Min: case BinaryOp::Max: case BinaryOp::Eq: case BinaryOp::Ne:
    case BinaryOp::Lt: case BinaryOp::Le: case BinaryOp::Gt: case BinaryOp::Ge:
      return true;
    default:
      return false;
  }
}

// The index tests and clamps of `v` in `s`: integer comparisons and
// integer min/max whose operands mention it.
size_t tests_of(const Stmt& s, const std::string& v) {
  size_t n = 0;
  visit_stmt(s, [](const Stmt&) {}, [&](const Expr& root) {
    visit_expr(root, [&](const Expr& e) {
      if (e->kind != ExprKind::Binary || !is_test(e->binary) || e->args[0].dtype() != DType::I64) return;
      if (mentions_var(e->args[0], v) || mentions_var(e->args[1], v)) ++n;
    });
  });
  return n;
}

class Splitter {
 public:
  explicit Splitter(std::set<std::string> taken) : taken_(std::move(taken)) {}

  Stmt stmt(const Stmt& s) {
    const auto children = [&] {
      return map_stmt(s, [](const Expr& e) { return e; }, [&](const Stmt& c) { return stmt(c); });
    };
    if (s->kind != StmtKind::For) return children();
    int64_t mn = 0, extent = 0;
    if (!as_const_int(s->min, &mn) || !as_const_int(s->extent, &extent) || extent <= 0) return children();
    bounds_[s->var] = {mn, mn + extent - 1};
    Stmt out = s->for_kind == ForKind::Serial ? split(s, mn, mn + extent - 1) : Stmt();
    if (!out.defined()) out = children();
    bounds_.erase(s->var);
    return out;
  }

 private:
  Bounds within(const std::string& v, int64_t lo, int64_t hi) const {
    Bounds b = bounds_;
    b[v] = {lo, hi};
    return b;
  }

  size_t tests_within(const Stmt& body, const std::string& v, int64_t lo, int64_t hi) const {
    return tests_of(simplify(body, within(v, lo, hi)), v);
  }

  // The split loop, or undefined when there is nothing to split.
  Stmt split(const Stmt& s, int64_t mn, int64_t mx) {
    const Stmt& body = s->body[0];
    const std::string& v = s->var;
    if (tests_of(body, v) == 0 || tests_within(body, v, mn, mx) == 0) return Stmt();
    // The interior is an interval around the middle (a window's borders are
    // at the ends); the tests are monotone in v, so a range free of them
    // stays free when it shrinks. (A single point is no witness: where a
    // test is false the simplifier folds it away too.)
    const int64_t mid = mn + (mx - mn) / 2;
    if (tests_within(body, v, mid, mid) != 0) return Stmt();
    int64_t lo = mn;
    while (lo < mid && lo <= mn + kMaxBorder && tests_within(body, v, lo, mid) != 0) ++lo;
    int64_t hi = mx;
    while (hi > mid && hi >= mx - kMaxBorder && tests_within(body, v, mid, hi) != 0) --hi;
    if (lo > mn + kMaxBorder || hi < mx - kMaxBorder || tests_within(body, v, lo, hi) != 0) return Stmt();
    // Worth a copy of the body only when the interior is most of the loop
    // (a parity test leaves one iteration "free" of it).
    if (hi - lo + 1 <= (lo - mn) + (mx - hi)) return Stmt();
    const Bounds inside = within(v, lo, hi);
    bounds_[v] = {lo, hi};
    const Stmt interior = for_loop(v, Expr(lo), Expr(hi - lo + 1), ForKind::Serial, stmt(simplify(body, inside)));
    bounds_[v] = {mn, mx};
    std::vector<Stmt> parts;
    if (lo > mn) parts.push_back(border(s, mn, lo));
    parts.push_back(interior);
    if (hi < mx) parts.push_back(border(s, hi + 1, mx + 1));
    return seq(parts);
  }

  // The loop over [from, to) with the original body, names made fresh.
  Stmt border(const Stmt& s, int64_t from, int64_t to) {
    const std::string n = fresh_name(s->var + "_border", &taken_);
    const Stmt body = rename_bound(substitute(s->body[0], {{s->var, var(n)}}), "_border", &taken_);
    return for_loop(n, Expr(from), Expr(to - from), ForKind::Serial, body);
  }

  std::set<std::string> taken_;
  Bounds bounds_;  // of the enclosing loops with constant bounds
};

}  // namespace

Kernel split_borders(const Kernel& k) {
  Kernel out = k;
  std::set<std::string> taken = names_in(k.body);
  taken.insert(k.syms.begin(), k.syms.end());
  out.body = Splitter(std::move(taken)).stmt(k.body);
  return out;
}

}  // namespace tessel::loop
