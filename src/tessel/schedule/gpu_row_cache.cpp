// The row cache of the row-per-block GPU schedule (gpu_schedule.h): a value
// that several gpu.lanes loops of a row compute from the inputs is computed
// once, kept in a row-long local buffer, and read back by the later loops.
//
// LayerNorm's row is read three times, once per loop (the mean's sum, the
// variance's sum, the normalised output), each time from global memory
// through the same chain of loads, adds and roundings (BERT's residual Add
// and bias fused in); softmax reads its row twice or three times. Every
// loop of a row has the same thread mapping (thread t takes iterations t,
// t + T, ...), so the element a thread caches is one it reads back itself,
// and the CUDA emitter keeps such a buffer in registers (C elements a thread
// for a row of C T), codegen/cuda/cuda_source.cpp's lane-distributed
// buffers. In loop IR it is an ordinary buffer: the evaluator and the
// schedule's tests see the same values.
//
//   gpu.lanes for k1 in [0, E) { acc[0] = acc[0] + X(k1) }
//   gpu.lanes for k3 in [0, E) { ... X(k3) ... }
// ->
//   allocate %rowc: f32[E] local
//   gpu.lanes for c in [0, E) { rowc[c] = X(c) }
//   gpu.lanes for k1 in [0, E) { acc[0] = acc[0] + rowc[k1] }
//   gpu.lanes for k3 in [0, E) { ... rowc[k3] ... }
//
// Cached: the largest subexpressions that occur in two or more of the row's
// lanes loops of one constant extent from 0, mention the loop variable, and
// read only the kernel's inputs (which nothing in the kernel writes), with
// no variable bound inside the loops, and that the first of those loops
// evaluates at every iteration (not under an if or a select's branch: the
// fill loop evaluates them everywhere, and a guarded load may be out of
// bounds where its guard is false); at most kMaxCached of them, and only
// while a thread holds at most kMaxPerThread elements of each.
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"
#include "tessel/schedule/gpu_schedule.h"

namespace tessel {

namespace {

using loop::Expr;
using loop::ExprKind;
using loop::Stmt;
using loop::StmtKind;
using loop::StmtNode;

constexpr int kMaxCached = 4;
constexpr int64_t kMaxPerThread = 8;

// The gpu.lanes loops of a row body reached through Seq, Let and Allocate.
void top_lanes_loops(const Stmt& s, std::vector<const StmtNode*>* out) {
  if (!s.defined()) return;
  if (s->kind == StmtKind::For) {
    if (s->for_kind == loop::ForKind::GpuLanes) out->push_back(s.node.get());
    return;
  }
  if (s->kind == StmtKind::Seq || s->kind == StmtKind::Let || s->kind == StmtKind::Allocate)
    for (const Stmt& c : s->body) top_lanes_loops(c, out);
}

// Variables bound inside `s` (lets, loops).
std::set<std::string> bound_inside(const Stmt& s) {
  std::set<std::string> names;
  loop::visit_stmt(s, [&](const Stmt& x) {
    if (x->kind == StmtKind::Let || x->kind == StmtKind::For) names.insert(x->var);
  }, [](const Expr&) {});
  return names;
}

class RowCache {
 public:
  RowCache(int64_t threads, const std::set<const loop::Buffer*>& inputs, std::set<std::string>* taken)
      : threads_(threads), inputs_(inputs), taken_(taken) {}

  Stmt run(const Stmt& row) {
    std::vector<const StmtNode*> all;
    top_lanes_loops(row, &all);
    // Loops of one extent from 0, in order; the first extent with two or more.
    for (const StmtNode* l : all) {
      int64_t e = 0;
      if (!loop::is_const(l->min, 0) || !loop::as_const_int(l->extent, &e) || e <= 0 ||
          (e + threads_ - 1) / threads_ > kMaxPerThread)
        continue;
      std::vector<const StmtNode*> group;
      for (const StmtNode* m : all) {
        int64_t f = 0;
        if (loop::is_const(m->min, 0) && loop::as_const_int(m->extent, &f) && f == e) group.push_back(m);
      }
      if (group.size() >= 2) {
        extent_ = e;
        loops_ = group;
        break;
      }
    }
    if (loops_.empty()) return row;
    find_shared();
    if (cached_.empty()) return row;
    return rewrite(row);
  }

 private:
  // The expressions of loop l's body with its variable renamed to `canon`.
  std::vector<Expr> renamed_exprs(const StmtNode* l, const std::string& canon) const {
    std::vector<Expr> out;
    const loop::VarMap m = {{l->var, loop::var(canon)}};
    loop::visit_stmt(l->body[0], [](const Stmt&) {}, [&](const Expr& root) { out.push_back(loop::substitute(root, m)); });
    return out;
  }

  // Those evaluated at every iteration: the values and indices of the lets
  // and stores reached through Let and Seq only (not under an if or an
  // inner loop), renamed. The fill loop evaluates a cached value at every
  // iteration, so it must come from here: a load the row reads only under
  // a condition may be out of bounds where the condition is false.
  std::vector<Expr> unconditional_exprs(const StmtNode* l, const std::string& canon) const {
    std::vector<Expr> out;
    const loop::VarMap m = {{l->var, loop::var(canon)}};
    std::function<void(const Stmt&)> walk = [&](const Stmt& st) {
      if (!st.defined()) return;
      if (st->kind == StmtKind::Let || st->kind == StmtKind::Store) {
        for (const Expr& e : loop::stmt_exprs(st)) out.push_back(loop::substitute(e, m));
      }
      if (st->kind == StmtKind::Let || st->kind == StmtKind::Seq)
        for (const Stmt& c : st->body) walk(c);
    };
    walk(l->body[0]);
    return out;
  }

  // Worth caching and safe to: mentions `var`, loads something, loads only
  // the inputs, uses no variable bound in the loop.
  bool cacheable(const Expr& e, const std::string& var, const std::set<std::string>& inner) const {
    bool loads = false, ok = true;
    loop::visit_expr(e, [&](const Expr& x) {
      if (x->kind == ExprKind::Load) {
        loads = true;
        ok = ok && inputs_.count(x->buffer.get());
      }
      if (x->kind == ExprKind::Var && x->name != var && inner.count(x->name)) ok = false;
    });
    return ok && loads && loop::mentions_var(e, var);
  }

  static bool occurs_in(const Expr& e, const std::vector<Expr>& roots) {
    bool found = false;
    for (const Expr& r : roots) {
      if (found) break;
      loop::visit_expr(r, [&](const Expr& x) { found = found || loop::equal(x, e); });
    }
    return found;
  }

  // The largest cacheable subexpressions of each loop that a later loop of
  // the group computes too, in the canonical variable `c_var_`. None may
  // mention a variable bound inside any of the loops (the same name could
  // be another variable in another loop).
  void find_shared() {
    c_var_ = fresh("rowc_i");
    std::set<std::string> inner;
    for (const StmtNode* l : loops_)
      for (const std::string& n : bound_inside(l->body[0])) inner.insert(n);
    for (size_t i = 0; i + 1 < loops_.size() && static_cast<int>(cached_.size()) < kMaxCached; ++i) {
      std::vector<Expr> later;
      for (size_t j = i + 1; j < loops_.size(); ++j)
        for (const Expr& e : renamed_exprs(loops_[j], c_var_)) later.push_back(e);
      // (Not into a select's values: those are evaluated under its condition.)
      std::function<void(const Expr&)> search = [&](const Expr& e) {
        if (static_cast<int>(cached_.size()) >= kMaxCached) return;
        for (const Cached& c : cached_)
          if (loop::equal(c.value, e)) return;
        if (cacheable(e, c_var_, inner) && occurs_in(e, later)) {
          cached_.push_back({e, nullptr, i});
          return;
        }
        if (e->kind == ExprKind::Select) return search(e->args[0]);
        for (const Expr& a : e->args) search(a);
      };
      for (const Expr& root : unconditional_exprs(loops_[i], c_var_)) search(root);
    }
  }

  // `e`, in loop `at` of the group, with every occurrence of a value cached
  // by then (in the loop's variable `var`) read from its buffer.
  Expr replaced(const Expr& e, const std::string& var, size_t at) const {
    for (const Cached& c : cached_) {
      if (c.first > at) continue;
      const Expr v = loop::substitute(c.value, {{c_var_, loop::var(var)}});
      if (loop::equal(e, v)) return loop::load(c.buffer, {loop::var(var)});
    }
    return loop::map_args(e, [&](const Expr& a) { return replaced(a, var, at); });
  }

  Stmt rewrite_loop(const StmtNode& l, size_t at) const {
    Stmt body = loop::map_stmt(l.body[0], [&](const Expr& e) { return replaced(e, l.var, at); },
                               [&](const Stmt& c) { return rewrite_inside(c, l.var, at); });
    Stmt out = loop::for_loop(l.var, l.min, l.extent, l.for_kind, body);
    // The loops that fill the caches first seen in this one go before it.
    std::vector<Stmt> fills;
    for (const Cached& c : cached_) {
      if (loops_[c.first] != &l) continue;
      const std::string v = c_var_;
      fills.push_back(loop::for_loop(v, Expr(0), Expr(extent_), loop::ForKind::GpuLanes,
                                     loop::store(c.buffer, {loop::var(v)}, c.value)));
    }
    if (fills.empty()) return out;
    fills.push_back(out);
    return loop::seq(fills);
  }

  Stmt rewrite_inside(const Stmt& s, const std::string& var, size_t at) const {
    return loop::map_stmt(s, [&](const Expr& e) { return replaced(e, var, at); },
                          [&](const Stmt& c) { return rewrite_inside(c, var, at); });
  }

  Stmt rewrite_top(const Stmt& s) const {
    if (!s.defined()) return s;
    if (s->kind == StmtKind::For) {
      for (size_t i = 0; i < loops_.size(); ++i)
        if (loops_[i] == s.node.get()) return rewrite_loop(*loops_[i], i);
      return s;
    }
    if (s->kind != StmtKind::Seq && s->kind != StmtKind::Let && s->kind != StmtKind::Allocate) return s;
    return loop::map_stmt(s, [](const Expr& e) { return e; }, [&](const Stmt& c) { return rewrite_top(c); });
  }

  Stmt rewrite(const Stmt& row) {
    for (Cached& c : cached_) {
      auto b = std::make_shared<loop::Buffer>();
      b->name = fresh("rowc");
      b->dtype = c.value.dtype();
      b->shape = {Expr(extent_)};
      b->scope = loop::BufferScope::Local;
      c.buffer = b;
    }
    Stmt out = rewrite_top(row);
    for (auto it = cached_.rbegin(); it != cached_.rend(); ++it) out = loop::allocate(it->buffer, out);
    return out;
  }

  std::string fresh(const std::string& base) {
    std::string n = base;
    for (int i = 0; taken_->count(n); ++i) n = base + std::to_string(i);
    taken_->insert(n);
    return n;
  }

  struct Cached {
    Expr value;  // in c_var_
    loop::BufferRef buffer;
    size_t first;  // index in loops_ of the first loop computing it
  };

  int64_t threads_;
  const std::set<const loop::Buffer*>& inputs_;
  std::set<std::string>* taken_;
  int64_t extent_ = 0;
  std::vector<const StmtNode*> loops_;
  std::string c_var_;
  std::vector<Cached> cached_;
};

}  // namespace

loop::Stmt cache_row_values(const loop::Stmt& row, int64_t threads, const std::set<const loop::Buffer*>& inputs,
                            std::set<std::string>* taken) {
  return RowCache(threads, inputs, taken).run(row);
}

}  // namespace tessel
