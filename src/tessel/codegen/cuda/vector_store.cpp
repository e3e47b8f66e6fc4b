// Stores of a vectorized loop gathered into one 4-, 8- or 16-byte store
// (emitter.h, VectorStore). The GPU schedule gives a thread V consecutive
// iterations of a row as `vectorized for v in [0, V)`; a 2-byte store per
// iteration would make every warp store instruction touch 32 sectors for 64
// useful bytes, so the emitter collects the V values in registers and
// stores them at once where that provably writes the same elements.
#include <algorithm>
#include <functional>
#include <map>

#include "tessel/codegen/cuda/emitter.h"
#include "tessel/loop/affine.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"

namespace tessel::cuda::detail {

using loop::Expr;
using loop::Stmt;
using loop::StmtKind;
using loop::StmtNode;


std::vector<VectorStore> vector_stores(const StmtNode& loop) {
  int64_t v = 0;
  if (loop.kind != StmtKind::For || loop.for_kind != loop::ForKind::Vectorized || !loop::is_const(loop.min, 0) ||
      !loop::as_const_int(loop.extent, &v) || v < 2)
    return {};
  // How often each buffer is stored and whether it is read, anywhere in the body.
  std::map<const loop::Buffer*, int> stores;
  std::map<const loop::Buffer*, bool> loaded;
  loop::visit_stmt(loop.body[0], [&](const Stmt& s) {
    if (s->kind == StmtKind::Store) ++stores[s->buffer.get()];
  }, [&](const Expr& root) {
    loop::visit_expr(root, [&](const Expr& e) {
      if (e->kind == loop::ExprKind::Load) loaded[e->buffer.get()] = true;
    });
  });
  // Stores every iteration runs (reached through lets, sequences and
  // allocations only: not inside an if or an inner loop),
  // with the lets around them, innermost last.
  std::vector<VectorStore> out;
  std::vector<std::pair<std::string, Expr>> lets;
  std::function<void(const Stmt&)> walk = [&](const Stmt& s) {
    if (!s.defined()) return;
    if (s->kind == StmtKind::Seq) {
      for (const Stmt& c : s->body) walk(c);
    } else if (s->kind == StmtKind::Allocate) {
      walk(s->body[0]);  // an iteration's own local buffer (a reduction's accumulator)
    } else if (s->kind == StmtKind::Let) {
      lets.emplace_back(s->var, s->value);
      walk(s->body[0]);
      lets.pop_back();
    } else if (s->kind == StmtKind::Store) {
      const loop::Buffer* b = s->buffer.get();
      const int bytes = static_cast<int>(v) * dtype_storage_size(b->dtype);
      if (b->scope != loop::BufferScope::Param || stores[b] != 1 || loaded[b] || (bytes != 4 && bytes != 8 && bytes != 16))
        return;
      // The indices over the loop variable and outer variables only.
      std::vector<Expr> indices = s->indices;
      for (Expr& i : indices)
        for (auto it = lets.rbegin(); it != lets.rend(); ++it) i = loop::substitute(i, {{it->first, it->second}});
      const std::optional<Expr> flat = loop::constant_flat_index(*b, indices);
      if (!flat || !loop::contiguous_runs(*flat, loop.var, v)) return;
      out.push_back({s.node.get(), loop::simplify(loop::substitute(*flat, {{loop.var, Expr(0)}})), bytes});
    }
  };
  walk(loop.body[0]);
  return out;
}

}  // namespace tessel::cuda::detail
