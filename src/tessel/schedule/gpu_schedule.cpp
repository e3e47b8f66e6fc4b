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

// Consecutive iterations of the flattened inner loop each thread takes: the
// row's M iterations in groups of `per_thread` (a vectorized loop; see
// GpuScheduleOptions::vector_bytes), when M is a constant multiple of it.
int64_t iterations_per_thread(const std::optional<RowNest>& nest, int64_t per_thread) {
  int64_t m = 0;
  if (!nest || nest->guarded || per_thread <= 1 || !loop::as_const_int(nest->threads_per_row, &m)) return 1;
  return m % per_thread == 0 ? per_thread : 1;
}

// The statement one thread runs for flat index g (see the header's picture),
// taking `v` consecutive iterations of the inner loop (v = 1: one).
Stmt thread_body(const StmtNode& par, const std::optional<RowNest>& nest, const Expr& g, int64_t v,
                 std::set<std::string>* taken) {
  if (!nest) return loop::let(par.var, par.min + g, par.body[0]);
  const StmtNode& j = *nest->inner;
  const Expr m = v > 1 ? loop::simplify(loop::floordiv(nest->threads_per_row, Expr(v))) : nest->threads_per_row;
  const Expr jj = loop::floormod(g, m);
  Stmt s;
  if (v > 1) {
    const std::string u = fresh("gpu_v", taken);
    s = loop::let(j.var, j.min + jj * Expr(v) + loop::var(u), j.body[0]);
    s = loop::for_loop(u, Expr(0), Expr(v), ForKind::Vectorized, s);
  } else {
    s = loop::let(j.var, j.min + jj, j.body[0]);
  }
  if (nest->guarded) s = loop::if_then(loop::binary(loop::BinaryOp::Lt, jj, j.extent), s);
  for (auto it = nest->lets.rbegin(); it != nest->lets.rend(); ++it) s = loop::let((*it)->var, (*it)->value, s);
  return loop::let(par.var, par.min + loop::floordiv(g, m), s);
}

Stmt map_to_threads(const StmtNode& par, const std::set<std::string>& syms, int64_t per_block, int64_t per_thread,
                    std::set<std::string>* taken) {
  const std::optional<RowNest> nest = row_nest(par.body[0], syms);
  const int64_t v = iterations_per_thread(nest, per_thread);
  const Expr total = loop::simplify(nest ? par.extent * loop::floordiv(nest->threads_per_row, Expr(v)) : par.extent);
  int64_t n = 0;
  // A small constant total gets one block of just enough whole warps.
  if (loop::as_const_int(total, &n) && n < per_block) per_block = std::max<int64_t>(32, (n + 31) / 32 * 32);
  const std::string b = fresh("gpu_block", taken), t = fresh("gpu_thread", taken), g = fresh("gpu_i", taken);
  const Expr gi = loop::var(g);
  Stmt body = loop::if_then(loop::binary(loop::BinaryOp::Lt, gi, total), thread_body(par, nest, gi, v, taken));
  body = loop::let(g, loop::var(b) * Expr(per_block) + loop::var(t), body);
  body = loop::for_loop(t, Expr(0), Expr(per_block), ForKind::GpuThreadX, body);
  const Expr blocks = loop::floordiv(total + Expr(per_block - 1), Expr(per_block));
  return loop::for_loop(b, Expr(0), blocks, ForKind::GpuBlockX, body);
}

// ---- a row per block (or per warp): reductions as gpu.lanes loops ----

// Perfectly nested loops `for a { for b { S } }` (b's bounds free of a) as
// one loop over a × b, so that one lanes loop gets all their iterations (a
// reduction over several axes, a row of several dims). Iteration order is
// unchanged.
Stmt collapse(const Stmt& s, std::set<std::string>* taken) {
  if (s->kind != StmtKind::For || !flattenable_kind(s->for_kind)) return s;
  Stmt inner = s->body[0];
  while (inner->kind == StmtKind::Seq && inner->body.size() == 1) inner = inner->body[0];
  if (inner->kind != StmtKind::For || !flattenable_kind(inner->for_kind) || loop::mentions_var(inner->min, s->var) ||
      loop::mentions_var(inner->extent, s->var))
    return s;
  inner = collapse(inner, taken);
  const std::string f = fresh(s->var + "_" + inner->var, taken);
  const Expr fv = loop::var(f), m = inner->extent;
  const Stmt body = loop::let(s->var, s->min + loop::floordiv(fv, m),
                              loop::let(inner->var, inner->min + loop::floormod(fv, m), inner->body[0]));
  return loop::for_loop(f, Expr(0), loop::simplify(s->extent * m), ForKind::Serial, body);
}

// The row body with its row-level loops (through Seq, Let, Allocate) collapsed.
Stmt collapse_row(const Stmt& s, std::set<std::string>* taken) {
  if (s->kind == StmtKind::For) return collapse(s, taken);
  if (s->kind != StmtKind::Seq && s->kind != StmtKind::Let && s->kind != StmtKind::Allocate) return s;
  return loop::map_stmt(s, [](const Expr& e) { return e; }, [&](const Stmt& c) { return collapse_row(c, taken); });
}

// The loops of a row body (reached through Seq, Let and Allocate) that can
// become gpu.lanes loops: each one a reduction (loop/verifier.h's
// lanes_reduction_update) or with independent iterations and no assert; at
// least one reduction unless `any`. nullopt when another loop, or a loop
// under an if, is in the way.
std::optional<std::vector<const StmtNode*>> lanes_loops(const Stmt& row, bool any = false) {
  std::vector<const StmtNode*> loops;
  bool reduction = false, ok = true;
  std::function<void(const Stmt&)> walk = [&](const Stmt& s) {
    if (!ok || !s.defined()) return;
    switch (s->kind) {
      case StmtKind::Seq: case StmtKind::Let: case StmtKind::Allocate:
        for (const Stmt& c : s->body) walk(c);
        return;
      case StmtKind::For: {
        if (!flattenable_kind(s->for_kind)) {
          ok = false;
          return;
        }
        bool other = false;
        loop::visit_stmt(s->body[0], [&](const Stmt& x) {
          other = other || x->kind == StmtKind::Assert || (x->kind == StmtKind::For && !flattenable_kind(x->for_kind));
        }, [](const Expr&) {});
        const bool red = loop::lanes_reduction_update(*s) != nullptr;
        ok = !other && (red || independent_iterations(*s));
        reduction = reduction || red;
        loops.push_back(s.node.get());
        return;
      }
      case StmtKind::Store: case StmtKind::Assert: return;
      default:  // an if: no loop inside
        ok = ok && s->kind == StmtKind::If;
        loop::visit_stmt(s, [&](const Stmt& x) { ok = ok && x->kind != StmtKind::For; }, [](const Expr&) {});
        return;
    }
  };
  walk(row);
  if (!ok || loops.empty() || !(reduction || any)) return std::nullopt;
  return loops;
}

// Threads per row: a warp for rows of up to 256 iterations, else about four
// iterations per thread (whole warps, at most 512); 128 when the extent is
// symbolic. 0 when the rows are too short to share (under 64 iterations).
int64_t lanes_threads(const std::vector<const StmtNode*>& loops) {
  int64_t m = 0;
  for (const StmtNode* l : loops) {
    int64_t c = 0;
    if (!loop::as_const_int(l->extent, &c)) return 128;
    m = std::max(m, c);
  }
  if (m < 64) return 0;
  if (m <= 256) return 32;
  return std::min<int64_t>(512, (m / 4 + 31) / 32 * 32);
}

// Whether every load of a param that mentions a lanes variable (or a let
// of one) has it in its last index: consecutive threads then read
// neighbouring elements.
bool lanes_coalesce(const std::vector<const StmtNode*>& loops) {
  bool ok = true;
  for (const StmtNode* l : loops) {
    std::set<std::string> vars = {l->var};
    loop::visit_stmt(l->body[0], [&](const Stmt& s) {
      if (s->kind != StmtKind::Let) return;
      for (const std::string& v : std::set<std::string>(vars))
        if (loop::mentions_var(s->value, v)) vars.insert(s->var);
    }, [](const Expr&) {});
    const auto mentions = [&](const Expr& e) {
      bool m = false;
      for (const std::string& v : vars) m = m || loop::mentions_var(e, v);
      return m;
    };
    loop::visit_stmt(l->body[0], [](const Stmt&) {}, [&](const Expr& root) {
      loop::visit_expr(root, [&](const Expr& e) {
        if (e->kind != loop::ExprKind::Load || e->buffer->scope != loop::BufferScope::Param || e->args.empty()) return;
        bool any = false;
        for (const Expr& i : e->args) any = any || mentions(i);
        if (any && !mentions(e->args.back())) ok = false;
      });
    });
  }
  return ok;
}

// The row body with its row-level loops made gpu.lanes loops.
Stmt with_lanes(const Stmt& s) {
  if (s->kind == StmtKind::For) return loop::for_loop(s->var, s->min, s->extent, ForKind::GpuLanes, s->body[0]);
  if (s->kind != StmtKind::Seq && s->kind != StmtKind::Let && s->kind != StmtKind::Allocate) return s;
  return loop::map_stmt(s, [](const Expr& e) { return e; }, [](const Stmt& c) { return with_lanes(c); });
}

// The kernel simplified and verified; nullopt when the verifier refuses it
// (an assert or a condition that may differ between the threads of a row,
// a param stored in a lanes loop and loaded...).
std::optional<loop::Kernel> verified(loop::Kernel out) {
  out = loop::simplify(out);
  try {
    loop::verify(out, loop::Target::Cuda);
  } catch (const Error&) {
    return std::nullopt;
  }
  return out;
}

Stmt replace_node(const Stmt& s, const StmtNode* target, const Stmt& with) {
  if (s.node.get() == target) return with;
  return loop::map_stmt(s, [](const Expr& e) { return e; },
                        [&](const Stmt& c) { return replace_node(c, target, with); });
}

// Rows to be given to blocks: the iterations of `loop`, which the blocks
// replace; `at(r, body)` binds row r's variables around its body.
struct RowSpace {
  const StmtNode* loop = nullptr;
  Expr rows;
  Stmt body;  // one row (its loops collapsed)
  std::function<Stmt(const Expr&, const Stmt&)> at;
};

// The kernel's inputs that nothing in it stores to.
std::set<const loop::Buffer*> read_only_params(const loop::Kernel& k) {
  std::set<const loop::Buffer*> in;
  for (size_t i = 0; i < k.num_inputs && i < k.params.size(); ++i) in.insert(k.params[i].get());
  loop::visit_stmt(k.body, [&](const Stmt& s) {
    if (s->kind == StmtKind::Store) in.erase(s->buffer.get());
  }, [](const Expr&) {});
  return in;
}

// Block b takes row b with T threads (gpu.thread.x), or, for T = 32, W
// rows, a warp each (gpu.thread.y); the row's loops become gpu.lanes loops.
// Row-level statements run in every thread of the row (same values).
// nullopt where the pattern does not fit or does not pay: short rows, loads
// strided along the row unless the rows are few (then block-wide reading
// still beats a thread per row), more than 2^31 - 1 blocks.
std::optional<loop::Kernel> rows_to_blocks(const loop::Kernel& k, const RowSpace& rs, std::set<std::string> taken,
                                           bool row_cache, bool need_reduction = true) {
  const std::optional<std::vector<const StmtNode*>> loops = lanes_loops(rs.body, !need_reduction);
  if (!loops) return std::nullopt;
  const int64_t threads = lanes_threads(*loops);
  if (threads == 0) return std::nullopt;
  int64_t rows = -1;
  const bool const_rows = loop::as_const_int(loop::simplify(rs.rows), &rows);
  if (!lanes_coalesce(*loops) && !(const_rows && rows <= 4096)) return std::nullopt;
  const int64_t per_block = threads > 32 ? 1 : const_rows ? std::clamp<int64_t>(rows, 1, 4) : 4;
  const Expr blocks = loop::simplify(loop::floordiv(rs.rows + Expr(per_block - 1), Expr(per_block)));
  int64_t nb = 0;
  if (loop::as_const_int(blocks, &nb) && nb > 2147483647) return std::nullopt;
  const std::string b = fresh("gpu_block", &taken), t = fresh("gpu_thread", &taken), y = fresh("gpu_row", &taken);
  const Expr r = per_block > 1 ? loop::var(b) * Expr(per_block) + loop::var(y) : loop::var(b);
  Stmt body = with_lanes(rs.body);
  if (row_cache) body = cache_row_values(body, threads, read_only_params(k), &taken);
  body = rs.at(r, body);
  if (per_block > 1) body = loop::if_then(loop::binary(loop::BinaryOp::Lt, r, rs.rows), body);
  body = loop::for_loop(t, Expr(0), Expr(threads), ForKind::GpuThreadX, body);
  if (per_block > 1) body = loop::for_loop(y, Expr(0), Expr(per_block), ForKind::GpuThreadY, body);
  body = loop::for_loop(b, Expr(0), blocks, ForKind::GpuBlockX, body);
  loop::Kernel out = k;
  out.body = replace_node(k.body, rs.loop, body);
  return verified(out);
}

// Whether a statement outside `inside` stores to a parameter.
bool stores_param_outside_of(const Stmt& s, const StmtNode* inside) {
  if (!s.defined() || s.node.get() == inside) return false;
  if (s->kind == StmtKind::Store && s->buffer->scope == loop::BufferScope::Param) return true;
  for (const Stmt& c : s->body)
    if (stores_param_outside_of(c, inside)) return true;
  return false;
}

// The top-level loops of a kernel without a parallel loop (through Seq,
// Let, Allocate); nullptr unless there is exactly one.
const StmtNode* only_top_loop(const Stmt& s, int* count) {
  if (!s.defined()) return nullptr;
  if (s->kind == StmtKind::For) {
    ++*count;
    return s.node.get();
  }
  const StmtNode* found = nullptr;
  if (s->kind == StmtKind::Seq || s->kind == StmtKind::Let || s->kind == StmtKind::Allocate)
    for (const Stmt& c : s->body)
      if (const StmtNode* f = only_top_loop(c, count)) found = f;
  return *count == 1 ? found : nullptr;
}

// A row per block where the kernel's rows fit (see the header): the
// parallel loop's iterations; the iterations of its one inner loop (rows
// of a rank-1 output, per-element reductions over a middle axis); the one
// top-level loop of a kernel without a parallel loop (a chunk of a small
// rank-1 output); or, for a reduction over everything, one block.
std::optional<loop::Kernel> lanes_schedule(const loop::Kernel& k, const StmtNode* par,
                                           const std::set<std::string>& syms, const std::set<std::string>& taken0,
                                           bool row_cache) {
  std::set<std::string> taken = taken0;
  if (par) {
    if (stores_param_outside_of(k.body, par)) return std::nullopt;
    RowSpace rows{par, par->extent, collapse_row(par->body[0], &taken),
                  [par](const Expr& r, const Stmt& b) { return loop::let(par->var, par->min + r, b); }};
    // Rows without a reduction too when they cannot be flattened into
    // threads (asserts, several loops: a gather's rows).
    const std::optional<RowNest> nest = row_nest(par->body[0], syms);
    if (std::optional<loop::Kernel> out = rows_to_blocks(k, rows, taken, row_cache, nest.has_value())) return out;
    if (!nest) return std::nullopt;
    const StmtNode& j = *nest->inner;
    const Expr m = nest->threads_per_row;
    RowSpace inner{par, loop::simplify(par->extent * m), collapse_row(j.body[0], &taken),
                   [par, &nest, &j, m](const Expr& r, const Stmt& b) {
                     const Expr jj = loop::floormod(r, m);
                     Stmt s = loop::let(j.var, j.min + jj, b);
                     if (nest->guarded) s = loop::if_then(loop::binary(loop::BinaryOp::Lt, jj, j.extent), s);
                     for (auto it = nest->lets.rbegin(); it != nest->lets.rend(); ++it)
                       s = loop::let((*it)->var, (*it)->value, s);
                     return loop::let(par->var, par->min + loop::floordiv(r, m), s);
                   }};
    return rows_to_blocks(k, inner, taken, row_cache);
  }
  int count = 0;
  const StmtNode* top = only_top_loop(k.body, &count);
  if (top && flattenable_kind(top->for_kind) && independent_iterations(*top) &&
      !stores_param_outside_of(k.body, top)) {
    RowSpace rows{top, top->extent, collapse_row(top->body[0], &taken),
                  [top](const Expr& r, const Stmt& b) { return loop::let(top->var, top->min + r, b); }};
    if (std::optional<loop::Kernel> out = rows_to_blocks(k, rows, taken, row_cache)) return out;
  }
  // A reduction over everything: one block of at least 256 threads.
  const Stmt body = collapse_row(k.body, &taken);
  const std::optional<std::vector<const StmtNode*>> loops = lanes_loops(body);
  if (!loops || lanes_threads(*loops) == 0) return std::nullopt;
  loop::Kernel out = k;
  out.body = loop::for_loop(fresh("gpu_thread", &taken), Expr(0), Expr(std::max<int64_t>(256, lanes_threads(*loops))),
                            ForKind::GpuThreadX, with_lanes(body));
  return verified(out);
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

// Contract and attention statements: kernels of their own emitters.
bool own_kernel(StmtKind k) { return k == StmtKind::Contract || k == StmtKind::Attention; }

// Contract (or attention) statements, found through Seq, Let, Allocate and
// Assert (what their emitters accept around one); nullptr and *other when
// one sits anywhere else.
const StmtNode* find_contract(const Stmt& s, bool* elsewhere) {
  if (own_kernel(s->kind)) return s.node.get();
  const bool transparent = s->kind == StmtKind::Seq || s->kind == StmtKind::Let || s->kind == StmtKind::Allocate;
  const StmtNode* found = nullptr;
  for (const Stmt& c : s->body) {
    if (!transparent) {
      loop::visit_stmt(c, [&](const Stmt& x) { *elsewhere = *elsewhere || own_kernel(x->kind); },
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
  if (o.lanes) {
    if (std::optional<loop::Kernel> lanes = lanes_schedule(k, par, syms, taken, o.row_cache)) return *lanes;
  }
  if (!par || stores_param_outside(k.body)) {
    out.body = single_thread(k.body, &taken);
  } else {
    // 16-byte stores (codegen/cuda): as many iterations per thread as the
    // widest output element fits into vector_bytes.
    int64_t widest = 1;
    for (size_t i = k.num_inputs; i < k.params.size(); ++i)
      widest = std::max<int64_t>(widest, dtype_storage_size(k.params[i]->dtype));
    const int64_t per_thread = o.vector_bytes / widest;
    out.body = replace_parallel(k.body, [&](const StmtNode& p) {
      return map_to_threads(p, syms, o.threads_per_block, per_thread, &taken);
    });
  }
  out = loop::simplify(out);
  loop::verify(out, loop::Target::Cuda);
  return out;
}

}  // namespace tessel
