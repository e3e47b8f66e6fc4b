#include "tessel/schedule/loop_primitives.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "tessel/loop/printer.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel {

using loop::Buffer;
using loop::BufferScope;
using loop::Expr;
using loop::ExprKind;
using loop::ForKind;
using loop::Kernel;
using loop::Stmt;
using loop::StmtKind;
using loop::StmtNode;

namespace {

const std::set<std::string> kLoopPrimitives = {"split", "reorder", "fuse", "tile",
                                               "vectorize", "unroll", "parallel", "bind"};

bool is_gpu_axis(ForKind k) {
  return k == ForKind::GpuBlockX || k == ForKind::GpuBlockY || k == ForKind::GpuBlockZ || k == ForKind::GpuThreadX ||
         k == ForKind::GpuThreadY || k == ForKind::GpuThreadZ;
}
bool is_thread_axis(ForKind k) {
  return k == ForKind::GpuThreadX || k == ForKind::GpuThreadY || k == ForKind::GpuThreadZ;
}

bool mentions_any(const Expr& e, const std::set<std::string>& names) {
  bool found = false;
  loop::visit_expr(e, [&](const Expr& x) { found = found || (x->kind == ExprKind::Var && names.count(x->name)); });
  return found;
}

bool any_mentions(const std::vector<Expr>& es, const std::set<std::string>& names) {
  for (const Expr& e : es)
    if (mentions_any(e, names)) return true;
  return false;
}

bool has_load(const Expr& e) {
  bool found = false;
  loop::visit_expr(e, [&](const Expr& x) { found = found || x->kind == ExprKind::Load; });
  return found;
}

// The statement a loop body is, seen through a Seq of one (the parser's blocks).
const Stmt& only_child(const Stmt& s) {
  return s->kind == StmtKind::Seq && s->body.size() == 1 ? only_child(s->body[0]) : s;
}

// `e`, or max(e, 0) where e may be negative (a negative extent runs nothing,
// but a product or remainder of negative extents would run something).
Expr nonneg(const Expr& e) {
  const std::optional<loop::Interval> b = loop::bounds_of(e, {});
  return b && b->lo >= 0 ? e : loop::simplify(loop::max(e, Expr(0)));
}

// `var` and the names inside `body` whose value depends on it: lets over
// one, loops whose bounds use one (pre-order sees definitions first).
std::set<std::string> dependent_names(const std::string& var, const Stmt& body) {
  std::set<std::string> dep = {var};
  loop::visit_stmt(body, [&](const Stmt& s) {
    if (s->kind == StmtKind::Let && mentions_any(s->value, dep)) dep.insert(s->var);
    if (s->kind == StmtKind::For && (mentions_any(s->min, dep) || mentions_any(s->extent, dep))) dep.insert(s->var);
  }, [](const Expr&) {});
  return dep;
}

// The buffer accesses of a statement.
struct Accesses {
  std::set<const Buffer*> allocated;  // by an Allocate inside it
  std::vector<const StmtNode*> stores;
  std::vector<Expr> loads;
  explicit Accesses(const Stmt& s) {
    loop::visit_stmt(s, [&](const Stmt& st) {
      if (st->kind == StmtKind::Allocate) allocated.insert(st->buffer.get());
      if (st->kind == StmtKind::Store) stores.push_back(st.node.get());
    }, [&](const Expr& root) {
      loop::visit_expr(root, [&](const Expr& x) {
        if (x->kind == ExprKind::Load) loads.push_back(x);
      });
    });
  }
  // Whether every load of `b` reads an element at the index of one of its stores.
  bool loaded_only_where_stored(const Buffer* b) const {
    for (const Expr& l : loads) {
      if (l->buffer.get() != b) continue;
      bool same = false;
      for (const StmtNode* st : stores) {
        if (st->buffer.get() != b) continue;
        bool eq = true;
        for (size_t d = 0; d < st->indices.size(); ++d) eq = eq && loop::equal(st->indices[d], l->args[d]);
        same = same || eq;
      }
      if (!same) return false;
    }
    return true;
  }
};

// `b[c] = b[c] op e` with op associative and commutative and e not reading b.
bool reduction_update(const StmtNode& st) {
  const Expr& v = st.value;
  if (v->kind != ExprKind::Binary) return false;
  using B = loop::BinaryOp;
  const B op = v->binary;
  if (op != B::Add && op != B::Mul && op != B::Min && op != B::Max && op != B::And && op != B::Or && op != B::Xor)
    return false;
  const auto is_acc = [&](const Expr& e) {
    if (e->kind != ExprKind::Load || e->buffer != st.buffer) return false;
    for (size_t d = 0; d < st.indices.size(); ++d)
      if (!loop::equal(e->args[d], st.indices[d])) return false;
    return true;
  };
  const auto reads_acc = [&](const Expr& e) {
    bool r = false;
    loop::visit_expr(e, [&](const Expr& x) { r = r || (x->kind == ExprKind::Load && x->buffer == st.buffer); });
    return r;
  };
  return (is_acc(v->args[0]) && !reads_acc(v->args[1])) || (is_acc(v->args[1]) && !reads_acc(v->args[0]));
}

// A loop and the statements around it, outermost first.
struct Site {
  const StmtNode* loop = nullptr;
  std::vector<const StmtNode*> path;
};

bool find_loop(const Stmt& s, const std::string& name, std::vector<const StmtNode*>* path, Site* out) {
  if (!s.defined()) return false;
  if (s->kind == StmtKind::For && s->var == name) {
    *out = {s.node.get(), *path};
    return true;
  }
  path->push_back(s.node.get());
  for (const Stmt& c : s->body)
    if (find_loop(c, name, path, out)) return true;
  path->pop_back();
  return false;
}

Stmt replace(const Stmt& s, const StmtNode* target, const Stmt& with) {
  if (s.node.get() == target) return with;
  return loop::map_stmt(s, [](const Expr& e) { return e; }, [&](const Stmt& c) { return replace(c, target, with); });
}

// One primitive being applied: the kernel so far and what to call it in errors.
struct Ctx {
  Kernel k;
  const ScheduleLimits& limits;
  std::string what;  // "split i by 4"

  template <class... A>
  [[noreturn]] void reject(const A&... a) const {
    fail(what, ": ", a...);
  }

  Site site(const std::string& name) const {
    std::vector<const StmtNode*> path;
    Site s;
    if (!find_loop(k.body, name, &path, &s)) reject("kernel ", k.name, " has no loop named '", name, "'");
    return s;
  }
  std::set<std::string> taken() const {
    std::set<std::string> t = loop::names_in(k.body);
    t.insert(k.syms.begin(), k.syms.end());
    return t;
  }
  void claim(const std::string& name, std::set<std::string>* taken) const {
    if (name.empty()) reject("a new loop needs a name");
    if (!taken->insert(name).second) reject("the name '", name, "' is already used in kernel ", k.name);
  }
  // Replaces a loop; the trees replaced stay alive until the primitive is
  // done, so its Sites and references into them remain valid.
  void set_loop(const StmtNode* target, const Stmt& with) {
    replaced.push_back(k.body);
    k.body = replace(k.body, target, with);
  }
  std::vector<Stmt> replaced;
};

// ---- legality of concurrent and lockstep iterations (see the header) ----

void check_independent(const Ctx& c, const StmtNode& l, bool thread_axis, const char* who) {
  const std::set<std::string> dep = dependent_names(l.var, l.body[0]);
  const Accesses a(l.body[0]);
  for (const StmtNode* st : a.stores) {
    const Buffer* b = st->buffer.get();
    const bool block_wide = thread_axis && b->scope == BufferScope::Shared;
    if (a.allocated.count(b) && !block_wide) continue;  // private to an iteration
    if (b->scope != BufferScope::Param && !block_wide)
      c.reject("loop ", l.var, " stores to %", b->name, ", allocated outside it, of which each ", who,
               " would have its own copy");
    if (!any_mentions(st->indices, dep))
      c.reject("loop ", l.var, " stores to %", b->name, " at an index that does not depend on ", l.var,
               ": its iterations would race");
    if (!a.loaded_only_where_stored(b))
      c.reject("loop ", l.var, " reads %", b->name, " at an element other than the ones it stores, which another ",
               who, " may write");
  }
  // Everything outside the loop runs once per task (CPU: the whole kernel
  // body is the task) or per thread / block.
  std::function<void(const Stmt&)> outside = [&](const Stmt& s) {
    if (!s.defined() || s.node.get() == &l) return;
    if (s->kind == StmtKind::Store &&
        (s->buffer->scope == BufferScope::Param || (thread_axis && s->buffer->scope == BufferScope::Shared)))
      c.reject("%", s->buffer->name, " is stored outside loop ", l.var, ", which every ", who, " would repeat");
    for (const Stmt& b : s->body) outside(b);
  };
  outside(c.k.body);
}

void check_vectorizable(const Ctx& c, const Site& site) {
  const StmtNode& l = *site.loop;
  for (const StmtNode* p : site.path)
    if (p->kind == StmtKind::For && p->for_kind == ForKind::Vectorized)
      c.reject("loop ", l.var, " is inside vectorized loop ", p->var);
  const std::set<std::string> lanes = dependent_names(l.var, l.body[0]);
  loop::visit_stmt(l.body[0], [&](const Stmt& s) {
    if (s->kind == StmtKind::Contract || s->kind == StmtKind::Attention)
      c.reject("vectorized loop ", l.var, " holds a contract or attention statement");
    if (s->kind != StmtKind::For) return;
    if (s->for_kind == ForKind::Vectorized) c.reject("vectorized loop ", l.var, " holds vectorized loop ", s->var);
    if (mentions_any(s->min, lanes) || mentions_any(s->extent, lanes))
      c.reject("the bounds of loop ", s->var, " vary between the lanes of vectorized loop ", l.var);
  }, [](const Expr&) {});
  const Accesses a(l.body[0]);
  for (const StmtNode* st : a.stores) {
    if (!any_mentions(st->indices, lanes) && mentions_any(st->value, lanes))
      c.reject("every lane of vectorized loop ", l.var, " would store to the same element of %", st->buffer->name,
               " (a reduction across lanes: vectorize another loop)");
    if (!a.loaded_only_where_stored(st->buffer.get()))
      c.reject("vectorized loop ", l.var, " reads %", st->buffer->name,
               " at an element other than the ones it stores (lanes run in lockstep)");
  }
}

// ---- the primitives ----

enum class Tail { Guard, None, Peel };

bool divisible(const Expr& extent, int64_t f) {
  int64_t e = 0;
  if (loop::as_const_int(extent, &e)) return e % f == 0;
  return loop::is_const(loop::simplify(loop::floormod(extent, Expr(f))), 0);
}

void split(Ctx& c, const std::string& name, int64_t f, const std::string& outer, const std::string& inner, Tail tail) {
  const Site site = c.site(name);
  const StmtNode& l = *site.loop;
  if (f < 1) c.reject("the factor must be at least 1");
  std::set<std::string> taken = c.taken();
  c.claim(outer, &taken);
  c.claim(inner, &taken);
  const bool exact = divisible(l.extent, f);
  if (tail == Tail::None && !exact)
    c.reject("extent ", loop::print(l.extent), " is not a multiple of ", f, "; use tail=guard or tail=peel");
  const Expr o = loop::var(outer), i = loop::var(inner);
  const Stmt inside = loop::substitute(l.body[0], {{l.var, loop::simplify(l.min + o * Expr(f) + i)}});
  if (tail == Tail::Guard && !exact) {
    const Expr in_range = loop::simplify(loop::binary(loop::BinaryOp::Lt, o * Expr(f) + i, l.extent));
    const Expr chunks = loop::simplify(loop::floordiv(l.extent + Expr(f - 1), Expr(f)));
    c.set_loop(&l, loop::for_loop(outer, 0, chunks, l.for_kind,
                                  loop::for_loop(inner, 0, f, ForKind::Serial, loop::if_then(in_range, inside))));
  } else {
    const Expr chunks = loop::simplify(loop::floordiv(l.extent, Expr(f)));
    Stmt main = loop::for_loop(outer, 0, chunks, l.for_kind, loop::for_loop(inner, 0, f, ForKind::Serial, inside));
    if (tail == Tail::Peel && !exact) {
      if (l.for_kind != ForKind::Serial && l.for_kind != ForKind::Unrolled && l.for_kind != ForKind::Vectorized)
        c.reject("tail=peel puts the remainder beside ", for_kind_name(l.for_kind), " loop ", name,
                 ", where every task or thread would run it; use tail=guard");
      loop::visit_stmt(l.body[0], [&](const Stmt& s) {
        if (s->kind == StmtKind::Contract || s->kind == StmtKind::Attention)
          c.reject("tail=peel would copy a contract or attention statement; use tail=guard");
      }, [](const Expr&) {});
      const std::string t = loop::fresh_name(name + "_tail", &taken);
      const Expr start = loop::simplify(l.min + chunks * Expr(f) + loop::var(t));
      const Expr rest = loop::simplify(loop::floormod(nonneg(l.extent), Expr(f)));
      Stmt rem = loop::rename_bound(loop::substitute(l.body[0], {{l.var, start}}), "_tail", &taken);
      main = loop::seq({main, loop::for_loop(t, 0, rest, l.for_kind, rem)});
    }
    c.set_loop(&l, main);
  }
  if (l.for_kind == ForKind::Vectorized) check_vectorizable(c, c.site(outer));
}

void reorder(Ctx& c, const std::vector<std::string>& order) {
  if (order.size() < 2) c.reject("needs at least two loops");
  const std::set<std::string> names(order.begin(), order.end());
  if (names.size() != order.size()) c.reject("a loop is named twice");
  // The outermost of them heads the nest.
  Site top;
  for (const std::string& n : order) {
    const Site s = c.site(n);
    if (!top.loop || s.path.size() < top.path.size()) top = s;
  }
  std::vector<const StmtNode*> chain = {top.loop};
  std::vector<Expr> guards;
  while (chain.size() < order.size()) {
    const Stmt* s = &only_child(chain.back()->body[0]);
    while ((*s)->kind == StmtKind::If && (*s)->body.size() == 1 && !has_load((*s)->value)) {
      guards.push_back((*s)->value);
      s = &only_child((*s)->body[0]);
    }
    if ((*s)->kind != StmtKind::For || !names.count((*s)->var))
      c.reject("the loops are not a perfect nest: the body of ", chain.back()->var,
               " holds more than the next of them (only a split's guard may lie between)");
    chain.push_back(s->node.get());
  }
  std::map<std::string, const StmtNode*> by_name;
  for (const StmtNode* l : chain) by_name[l->var] = l;
  // A loop's bounds may use only loops that stay outside it.
  std::set<std::string> inside(names);
  for (const std::string& n : order) {
    inside.erase(n);
    const StmtNode& l = *by_name.at(n);
    for (const std::string& v : inside)
      if (loop::mentions_var(l.min, v) || loop::mentions_var(l.extent, v))
        c.reject("the bounds of loop ", n, " depend on ", v, ", which would move inside it");
  }
  const Stmt& body = chain.back()->body[0];
  const Accesses a(body);
  std::map<std::string, std::set<std::string>> deps;
  for (const std::string& n : order) deps[n] = dependent_names(n, body);
  for (const StmtNode* st : a.stores) {
    const Buffer* b = st->buffer.get();
    if (a.allocated.count(b)) continue;
    if (!a.loaded_only_where_stored(b))
      c.reject("the nest reads %", b->name, " at an element other than the ones it stores, a dependence the new ",
               "order may break");
    bool each = true;
    for (const std::string& n : order) each = each && any_mentions(st->indices, deps[n]);
    if (!each && !reduction_update(*st))
      c.reject("the nest stores to %", b->name, " at an index that does not depend on every loop of it, so the ",
               "order decides which value stays");
  }
  Stmt s = body;
  for (size_t g = guards.size(); g-- > 0;) s = loop::if_then(guards[g], s);
  for (size_t p = order.size(); p-- > 0;) {
    const StmtNode& l = *by_name.at(order[p]);
    s = loop::for_loop(l.var, l.min, l.extent, l.for_kind, s);
  }
  c.set_loop(top.loop, s);
  for (const std::string& n : order)
    if (by_name.at(n)->for_kind == ForKind::Vectorized) check_vectorizable(c, c.site(n));
}

void fuse(Ctx& c, const std::string& outer, const std::string& inner, const std::string& into) {
  const StmtNode& o = *c.site(outer).loop;
  c.site(inner);  // "no loop named" first
  const Stmt& child = only_child(o.body[0]);
  if (child->kind != StmtKind::For || child->var != inner)
    c.reject("loop ", inner, " is not directly inside loop ", outer, " (nothing else may be in its body)");
  const StmtNode& i = *child;
  if (loop::mentions_var(i.min, outer) || loop::mentions_var(i.extent, outer))
    c.reject("the bounds of loop ", inner, " depend on ", outer);
  if (i.for_kind != ForKind::Serial)
    c.reject("inner loop ", inner, " is ", for_kind_name(i.for_kind), "; fuse before changing its kind");
  std::set<std::string> taken = c.taken();
  c.claim(into, &taken);
  const Expr f = loop::var(into);
  const Stmt body = loop::substitute(i.body[0], {{outer, loop::simplify(o.min + loop::floordiv(f, i.extent))},
                                                 {inner, loop::simplify(i.min + loop::floormod(f, i.extent))}});
  const Expr extent = loop::simplify(nonneg(o.extent) * nonneg(i.extent));
  c.set_loop(&o, loop::for_loop(into, 0, extent, o.for_kind, body));
  // The inner loop's iterations now run the way the outer loop's did.
  const Site fused = c.site(into);
  if (o.for_kind == ForKind::Vectorized) check_vectorizable(c, fused);
  if (o.for_kind == ForKind::Parallel || is_gpu_axis(o.for_kind))
    check_independent(c, *fused.loop, is_thread_axis(o.for_kind), "task or thread");
}

void set_kind(Ctx& c, const Site& site, ForKind kind) {
  const StmtNode& l = *site.loop;
  c.set_loop(&l, loop::for_loop(l.var, l.min, l.extent, kind, l.body[0]));
}

// The constant extent of a loop that is to become `kind` (a serial loop, or
// one of that kind already).
int64_t constant_extent(const Ctx& c, const StmtNode& l, ForKind kind) {
  if (l.for_kind != ForKind::Serial && l.for_kind != kind)
    c.reject("loop ", l.var, " is already ", for_kind_name(l.for_kind));
  int64_t e = 0;
  if (!loop::as_const_int(l.extent, &e))
    c.reject("loop ", l.var, " has extent ", loop::print(l.extent), ", not a constant (split it first)");
  return e;
}

void vectorize(Ctx& c, const std::string& name) {
  const Site site = c.site(name);
  const int64_t e = constant_extent(c, *site.loop, ForKind::Vectorized);
  if (e < 1 || e > c.limits.max_vector_lanes)
    c.reject("extent ", e, " is outside [1, ", c.limits.max_vector_lanes, "], the vector lanes allowed");
  check_vectorizable(c, site);
  set_kind(c, site, ForKind::Vectorized);
}

void unroll(Ctx& c, const std::string& name) {
  const Site site = c.site(name);
  const int64_t e = constant_extent(c, *site.loop, ForKind::Unrolled);
  if (e > c.limits.max_unroll) c.reject("extent ", e, " is more than max_unroll ", c.limits.max_unroll);
  set_kind(c, site, ForKind::Unrolled);
}

void parallel(Ctx& c, const std::string& name) {
  if (c.limits.gpu) c.reject("parallel loops are for CPUs; on a GPU bind the loop to an axis");
  const Site site = c.site(name);
  const StmtNode& l = *site.loop;
  if (l.for_kind != ForKind::Serial) c.reject("loop ", name, " is already ", for_kind_name(l.for_kind));
  for (const StmtNode* p : site.path)
    if (p->kind == StmtKind::For || p->kind == StmtKind::If)
      c.reject("loop ", name, " is not at the top level (it is inside ",
               p->kind == StmtKind::For ? "loop " + p->var : std::string("an if"),
               "): the runtime splits only a top-level loop across threads");
  loop::visit_stmt(c.k.body, [&](const Stmt& s) {
    if (s->kind == StmtKind::For && s->for_kind == ForKind::Parallel)
      c.reject("kernel ", c.k.name, " already has parallel loop ", s->var, " (at most one)");
  }, [](const Expr&) {});
  const std::set<std::string> syms(c.k.syms.begin(), c.k.syms.end());
  for (const Expr& b : {l.min, l.extent})
    loop::visit_expr(b, [&](const Expr& x) {
      if ((x->kind == ExprKind::Var && !syms.count(x->name)) || x->kind == ExprKind::Load)
        c.reject("the bounds of loop ", name, " use ", loop::print(x),
                 ", but the runtime computes them from the syms alone");
    });
  check_independent(c, l, false, "task");
  set_kind(c, site, ForKind::Parallel);
}

void bind(Ctx& c, const std::string& name, const std::string& axis) {
  if (!c.limits.gpu) c.reject("GPU axes need a GPU target (the limits say CPU)");
  std::optional<ForKind> kind;
  for (ForKind k : loop::all_for_kinds())
    if (is_gpu_axis(k) && axis == for_kind_name(k)) kind = k;
  if (!kind) c.reject("axis '", axis, "' is not one of gpu.block.x|y|z, gpu.thread.x|y|z");
  const Site site = c.site(name);
  const StmtNode& l = *site.loop;
  if (l.for_kind != ForKind::Serial) c.reject("loop ", name, " is already ", for_kind_name(l.for_kind));
  check_independent(c, l, is_thread_axis(*kind), is_thread_axis(*kind) ? "thread" : "block");
  set_kind(c, site, *kind);
}

// ---- checks of the whole kernel after each primitive ----

void check_gpu_axes(const Ctx& c) {
  const ScheduleLimits& lim = c.limits;
  const std::set<std::string> syms(c.k.syms.begin(), c.k.syms.end());
  std::map<ForKind, const StmtNode*> axes;
  std::function<void(const Stmt&, const StmtNode*)> walk = [&](const Stmt& s, const StmtNode* plain) {
    if (!s.defined()) return;
    if (s->kind == StmtKind::For && is_gpu_axis(s->for_kind)) {
      const char* k = for_kind_name(s->for_kind);
      if (plain)
        c.reject(k, " loop ", s->var, " would be inside ", for_kind_name(plain->for_kind), " loop ", plain->var,
                 " (GPU axes go outside every other loop)");
      if (!axes.emplace(s->for_kind, s.node.get()).second)
        c.reject("two ", k, " loops: ", axes[s->for_kind]->var, " and ", s->var);
      loop::visit_expr(s->extent, [&](const Expr& x) {
        if ((x->kind == ExprKind::Var && !syms.count(x->name)) || x->kind == ExprKind::Load)
          c.reject("the extent of ", k, " loop ", s->var, " uses ", loop::print(x), "; launch extents use only syms");
      });
      int64_t e = 0;
      const bool known = loop::as_const_int(s->extent, &e);
      if (is_thread_axis(s->for_kind)) {
        if (!known) c.reject(k, " loop ", s->var, " needs a constant extent, not ", loop::print(s->extent));
        const int64_t most = s->for_kind == ForKind::GpuThreadZ ? lim.max_block_dim_z : lim.max_threads_per_block;
        if (e > most) c.reject(k, " loop ", s->var, " has ", e, " threads, more than the ", most, " allowed");
      } else if (known) {
        const int64_t most = s->for_kind == ForKind::GpuBlockX ? int64_t{INT32_MAX} : lim.max_grid_yz;
        if (e > most) c.reject(k, " loop ", s->var, " has ", e, " blocks, more than the ", most, " allowed");
      }
    } else if (s->kind == StmtKind::For) {
      plain = s.node.get();
    }
    for (const Stmt& b : s->body) walk(b, plain);
  };
  walk(c.k.body, nullptr);
  int64_t threads = 1;
  std::string dims;
  for (const auto& [kind, l] : axes) {
    int64_t e = 0;
    if (!is_thread_axis(kind) || !loop::as_const_int(l->extent, &e)) continue;
    threads = checked_mul(threads, std::max<int64_t>(e, 0));
    dims += str_cat(dims.empty() ? "" : " x ", e, " (", l->var, ")");
  }
  if (threads > lim.max_threads_per_block)
    c.reject("a block of ", threads, " threads, ", dims, ", is more than max_threads_per_block ",
             lim.max_threads_per_block);
}

void check_shared_memory(const Ctx& c) {
  int64_t bytes = 0;
  loop::visit_stmt(c.k.body, [&](const Stmt& s) {
    if (s->kind != StmtKind::Allocate || s->buffer->scope != BufferScope::Shared) return;
    int64_t n = dtype_storage_size(s->buffer->dtype);
    for (const Expr& d : s->buffer->shape) {
      int64_t e = 0;
      if (!loop::as_const_int(d, &e)) c.reject("shared buffer %", s->buffer->name, " has no constant shape");
      n = checked_mul(n, e);
    }
    bytes = checked_add(bytes, n);
  }, [](const Expr&) {});
  if (bytes > c.limits.max_shared_bytes)
    c.reject("the kernel's shared buffers take ", bytes, " bytes, more than the limit of ", c.limits.max_shared_bytes,
             " per block");
}

std::optional<std::string> attr_of(const Primitive& p, std::string_view key) {
  for (const auto& [k, v] : p.attrs)
    if (k == key) return v;
  return std::nullopt;
}

std::string text_attr(const Primitive& p, std::string_view key, const std::string& fallback) {
  return attr_of(p, key).value_or(fallback);
}

int64_t int_attr(const Ctx& c, const Primitive& p, std::string_view key) {
  const std::optional<std::string> v = attr_of(p, key);
  if (!v) c.reject("needs ", key, "=<integer>");
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size()) c.reject(key, "=", *v, " is not an integer");
  return out;
}

void apply_one(Ctx& c, const Primitive& p) {
  const std::vector<std::string>& a = p.args;
  const auto arity = [&](size_t n) {
    if (a.size() != n) c.reject("takes ", n, " loop name", n == 1 ? "" : "s", ", not ", a.size());
  };
  if (p.name == "split") {
    arity(1);
    const int64_t f = int_attr(c, p, "factor");
    c.what += str_cat(" by ", f);
    const std::string tail = text_attr(p, "tail", "guard");
    if (tail != "guard" && tail != "none" && tail != "peel") c.reject("tail=", tail, " is not guard, none or peel");
    split(c, a[0], f, text_attr(p, "outer", a[0] + "_o"), text_attr(p, "inner", a[0] + "_i"),
          tail == "guard" ? Tail::Guard : tail == "none" ? Tail::None : Tail::Peel);
  } else if (p.name == "reorder") {
    reorder(c, a);
  } else if (p.name == "fuse") {
    arity(2);
    fuse(c, a[0], a[1], text_attr(p, "into", a[0] + "_" + a[1]));
  } else if (p.name == "tile") {
    arity(2);
    const int64_t f1 = int_attr(c, p, "f1"), f2 = int_attr(c, p, "f2");
    const Stmt& child = only_child(c.site(a[0]).loop->body[0]);
    if (child->kind != StmtKind::For || child->var != a[1])
      c.reject("loop ", a[1], " is not directly inside loop ", a[0]);
    split(c, a[0], f1, a[0] + "_o", a[0] + "_i", Tail::Guard);
    split(c, a[1], f2, a[1] + "_o", a[1] + "_i", Tail::Guard);
    reorder(c, {a[0] + "_o", a[1] + "_o", a[0] + "_i", a[1] + "_i"});
  } else if (p.name == "vectorize") {
    arity(1);
    vectorize(c, a[0]);
  } else if (p.name == "unroll") {
    arity(1);
    unroll(c, a[0]);
  } else if (p.name == "parallel") {
    arity(1);
    parallel(c, a[0]);
  } else if (p.name == "bind") {
    arity(1);
    const std::optional<std::string> axis = attr_of(p, "axis");
    if (!axis) c.reject("needs axis=gpu.block.x|y|z or gpu.thread.x|y|z");
    bind(c, a[0], *axis);
  } else {
    c.reject("not a loop primitive (", p.name, ")");
  }
}

}  // namespace

bool is_loop_primitive(const std::string& name) { return kLoopPrimitives.count(name) > 0; }

loop::Kernel apply_loop_primitives(const loop::Kernel& k, const Schedule& s, const ScheduleLimits& limits) {
  const loop::Target target = limits.gpu ? loop::Target::Cuda : loop::Target::Cpu;
  try {
    loop::verify(k, target);
  } catch (const Error& e) {
    fail("loop primitives: kernel ", k.name, " does not verify for the ", limits.gpu ? "GPU" : "CPU",
         " before scheduling: ", e.what());
  }
  Kernel out = k;
  for (const Primitive& p : s.prims) {
    if (p.name.find('.') != std::string::npos) continue;  // a template knob
    std::string what = p.name;
    for (const std::string& a : p.args) what += " " + a;
    Ctx c{out, limits, what, {}};
    apply_one(c, p);
    if (limits.gpu) check_gpu_axes(c);
    check_shared_memory(c);
    try {
      loop::verify(c.k, target);
    } catch (const Error& e) {
      c.reject("the result does not verify: ", e.what());
    }
    out = std::move(c.k);
  }
  // A schedule without loop primitives still meets the limits.
  Ctx final{out, limits, "schedule", {}};
  check_shared_memory(final);
  return out;
}

}  // namespace tessel
