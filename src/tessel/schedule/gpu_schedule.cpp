#include "tessel/schedule/gpu_schedule.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tessel/loop/simplify.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel {

using loop::Expr;
using loop::ForKind;
using loop::Stmt;
using loop::StmtKind;
using loop::StmtNode;

namespace {

bool is_parallel(const Stmt& s) { return s->kind == StmtKind::For && s->for_kind == ForKind::Parallel; }

// The verifier allows the Parallel loop only outside loops and ifs, so it is
// found through Seq, Let and Allocate alone.
const StmtNode* find_parallel(const Stmt& s) {
  if (!s.defined()) return nullptr;
  if (is_parallel(s)) return s.node.get();
  if (s->kind != StmtKind::Seq && s->kind != StmtKind::Let && s->kind != StmtKind::Allocate) return nullptr;
  for (const Stmt& c : s->body)
    if (const StmtNode* p = find_parallel(c)) return p;
  return nullptr;
}

// Whether anything outside the parallel loop stores to a parameter.
bool stores_param_outside(const Stmt& s) {
  if (!s.defined() || is_parallel(s)) return false;
  if (s->kind == StmtKind::Store && s->buffer->scope == loop::BufferScope::Param) return true;
  for (const Stmt& c : s->body)
    if (stores_param_outside(c)) return true;
  return false;
}

Stmt replace_parallel(const Stmt& s, const std::function<Stmt(const StmtNode&)>& f) {
  if (is_parallel(s)) return f(*s);
  return loop::map_stmt(s, [](const Expr& e) { return e; },
                        [&](const Stmt& c) { return replace_parallel(c, f); });
}

std::string fresh(const std::string& base, std::set<std::string>* taken) {
  std::string n = base;
  for (int i = 0; taken->count(n); ++i) n = base + std::to_string(i);
  taken->insert(n);
  return n;
}

bool only_syms(const Expr& e, const std::set<std::string>& syms) {
  bool ok = true;
  loop::visit_expr(e, [&](const Expr& x) {
    if ((x->kind == loop::ExprKind::Var && !syms.count(x->name)) || x->kind == loop::ExprKind::Load) ok = false;
  });
  return ok;
}

// The iterations of `j` are independent: every parameter it stores to is
// indexed by j and never read in it; every other buffer it writes is
// allocated inside it (private to the iteration).
bool independent_iterations(const StmtNode& j) {
  std::set<const loop::Buffer*> stored_params, allocated;
  bool ok = true;
  loop::visit_stmt(j.body[0], [&](const Stmt& s) {
    if (s->kind == StmtKind::Allocate) allocated.insert(s->buffer.get());
    if (s->kind != StmtKind::Store) return;
    const loop::Buffer* b = s->buffer.get();
    if (b->scope != loop::BufferScope::Param) {
      ok = ok && allocated.count(b);
      return;
    }
    bool indexed = false;
    for (const Expr& i : s->indices) indexed = indexed || loop::mentions_var(i, j.var);
    ok = ok && indexed;
    stored_params.insert(b);
  }, [](const Expr&) {});
  loop::visit_stmt(j.body[0], [](const Stmt&) {}, [&](const Expr& root) {
    loop::visit_expr(root, [&](const Expr& e) {
      if (e->kind == loop::ExprKind::Load && stored_params.count(e->buffer.get())) ok = false;
    });
  });
  return ok;
}

// The row body as lets around one inner loop, when it has that form.
struct RowNest {
  std::vector<const StmtNode*> lets;
  const StmtNode* inner = nullptr;
  Expr threads_per_row;  // M: iterations of the inner loop given to threads
  bool guarded = false;  // the inner extent varies by row and is at most M
};

bool flattenable_kind(ForKind k) { return k == ForKind::Serial || k == ForKind::Vectorized || k == ForKind::Unrolled; }

std::optional<RowNest> row_nest(const Stmt& row, const std::set<std::string>& syms) {
  RowNest n;
  Stmt s = row;
  while (true) {
    if (s->kind == StmtKind::Seq && s->body.size() == 1) {
      s = s->body[0];
    } else if (s->kind == StmtKind::Let) {
      n.lets.push_back(s.node.get());
      s = s->body[0];
    } else {
      break;
    }
  }
  if (s->kind != StmtKind::For || !flattenable_kind(s->for_kind) || !independent_iterations(*s)) return std::nullopt;
  n.inner = s.node.get();
  const Expr& m = s->extent;
  int64_t c = 0;
  if (only_syms(m, syms)) {
    n.threads_per_row = m;
  } else if (m->kind == loop::ExprKind::Binary && m->binary == loop::BinaryOp::Min &&
             (loop::as_const_int(m->args[0], &c) || loop::as_const_int(m->args[1], &c)) && c > 0) {
    n.threads_per_row = Expr(c);
    n.guarded = true;
  } else {
    return std::nullopt;
  }
  return n;
}

// The statement one thread runs for flat index g (see the header's picture).
Stmt thread_body(const StmtNode& par, const std::optional<RowNest>& nest, const Expr& g) {
  if (!nest) return loop::let(par.var, par.min + g, par.body[0]);
  const StmtNode& j = *nest->inner;
  const Expr m = nest->threads_per_row;
  const Expr jj = loop::floormod(g, m);
  Stmt s = loop::let(j.var, j.min + jj, j.body[0]);
  if (nest->guarded) s = loop::if_then(loop::binary(loop::BinaryOp::Lt, jj, j.extent), s);
  for (auto it = nest->lets.rbegin(); it != nest->lets.rend(); ++it) s = loop::let((*it)->var, (*it)->value, s);
  return loop::let(par.var, par.min + loop::floordiv(g, m), s);
}

Stmt map_to_threads(const StmtNode& par, const std::set<std::string>& syms, int64_t per_block,
                    std::set<std::string>* taken) {
  const std::optional<RowNest> nest = row_nest(par.body[0], syms);
  const Expr total = loop::simplify(nest ? par.extent * nest->threads_per_row : par.extent);
  int64_t n = 0;
  // A small constant total gets one block of just enough whole warps.
  if (loop::as_const_int(total, &n) && n < per_block) per_block = std::max<int64_t>(32, (n + 31) / 32 * 32);
  const std::string b = fresh("gpu_block", taken), t = fresh("gpu_thread", taken), g = fresh("gpu_i", taken);
  const Expr gi = loop::var(g);
  Stmt body = loop::if_then(loop::binary(loop::BinaryOp::Lt, gi, total), thread_body(par, nest, gi));
  body = loop::let(g, loop::var(b) * Expr(per_block) + loop::var(t), body);
  body = loop::for_loop(t, Expr(0), Expr(per_block), ForKind::GpuThreadX, body);
  const Expr blocks = loop::floordiv(total + Expr(per_block - 1), Expr(per_block));
  return loop::for_loop(b, Expr(0), blocks, ForKind::GpuBlockX, body);
}

// The whole body in one thread; a parallel loop becomes serial.
Stmt single_thread(const Stmt& body, std::set<std::string>* taken) {
  Stmt serial = replace_parallel(body, [](const StmtNode& p) {
    return loop::for_loop(p.var, p.min, p.extent, ForKind::Serial, p.body[0]);
  });
  const std::string b = fresh("gpu_block", taken), t = fresh("gpu_thread", taken);
  return loop::for_loop(b, Expr(0), Expr(1), ForKind::GpuBlockX,
                        loop::for_loop(t, Expr(0), Expr(1), ForKind::GpuThreadX, serial));
}

// Contract statements, found through Seq, Let, Allocate and Assert (what
// the tensor-core emitter accepts around one); nullptr and *other when one
// sits anywhere else.
const StmtNode* find_contract(const Stmt& s, bool* elsewhere) {
  if (s->kind == StmtKind::Contract) return s.node.get();
  const bool transparent = s->kind == StmtKind::Seq || s->kind == StmtKind::Let || s->kind == StmtKind::Allocate;
  const StmtNode* found = nullptr;
  for (const Stmt& c : s->body) {
    if (!transparent) {
      loop::visit_stmt(c, [&](const Stmt& x) { *elsewhere = *elsewhere || x->kind == StmtKind::Contract; },
                       [](const Expr&) {});
      continue;
    }
    const StmtNode* f = find_contract(c, elsewhere);
    if (f && found) *elsewhere = true;
    if (f) found = f;
  }
  return found;
}

}  // namespace

loop::Kernel schedule_for_gpu(const loop::Kernel& k, const GpuScheduleOptions& o) {
  TS_CHECK(o.threads_per_block >= 32 && o.threads_per_block <= 1024 && o.threads_per_block % 32 == 0,
           "gpu schedule: threads_per_block must be a multiple of 32 in [32, 1024], got ", o.threads_per_block);
  loop::Kernel out = k;
  std::set<std::string> taken = loop::names_in(k.body);
  taken.insert(k.syms.begin(), k.syms.end());
  const std::set<std::string> syms(k.syms.begin(), k.syms.end());
  bool elsewhere = false;
  if (find_contract(k.body, &elsewhere) || elsewhere) {
    // The tensor-core GEMM (codegen/cuda/mma_gemm.h) maps the statement
    // onto blocks, warps and mma instructions itself.
    TS_CHECK(!elsewhere, "gpu schedule: kernel ", k.name,
             " has a contract statement inside a loop or an if, or more than one");
    TS_CHECK(!find_parallel(k.body), "gpu schedule: kernel ", k.name, " has a contract and a parallel loop");
    out = loop::simplify(out);
    loop::verify(out, loop::Target::Cuda);
    return out;
  }
  const StmtNode* par = find_parallel(k.body);
  if (!par || stores_param_outside(k.body)) {
    out.body = single_thread(k.body, &taken);
  } else {
    out.body = replace_parallel(k.body, [&](const StmtNode& p) {
      return map_to_threads(p, syms, o.threads_per_block, &taken);
    });
  }
  out = loop::simplify(out);
  loop::verify(out, loop::Target::Cuda);
  return out;
}

}  // namespace tessel
