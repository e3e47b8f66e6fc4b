// Loads and stores: row-major flattening, and the choice between a scalar
// access, one contiguous vector access, a short-stride span and a shuffle
// (loads), and a gather/scatter when widening.
#include <algorithm>
#include <functional>
#include <utility>

#include "tessel/codegen/cpu/emitter.h"
#include "tessel/codegen/cpu/llvm_types.h"
#include "tessel/loop/affine.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::cpu::detail {

namespace {

llvm::Align elem_align(llvm::Module& m, llvm::Type* elem) {
  return m.getDataLayout().getABITypeAlign(elem);
}

// `e` as invariant + varying (either may be 0): sums, differences and
// products by constants are split term by term, any other subexpression
// goes whole to the side `varies` puts it on.
std::pair<loop::Expr, loop::Expr> split_terms(const loop::Expr& e, const std::function<bool(const loop::Expr&)>& varies) {
  using loop::BinaryOp;
  if (e->kind == loop::ExprKind::Binary && e.dtype() == DType::I64) {
    int64_t c = 0;
    switch (e->binary) {
      case BinaryOp::Add: case BinaryOp::Sub: {
        auto [ai, av] = split_terms(e->args[0], varies);
        auto [bi, bv] = split_terms(e->args[1], varies);
        return e->binary == BinaryOp::Add ? std::pair{ai + bi, av + bv} : std::pair{ai - bi, av - bv};
      }
      case BinaryOp::Mul:
        for (int k = 0; k < 2; ++k)
          if (loop::as_const_int(e->args[1 - k], &c)) {
            auto [i, v] = split_terms(e->args[k], varies);
            return {i * loop::Expr(c), v * loop::Expr(c)};
          }
        break;
      default: break;
    }
  }
  return varies(e) ? std::pair{loop::Expr(int64_t{0}), e} : std::pair{e, loop::Expr(int64_t{0})};
}

}  // namespace

// A gather's (scatter's) addresses: where the lane-varying terms of a
// non-affine flat index (a padded convolution's clamped taps) fit in int32,
// the base advanced by the other terms (a scalar) and a 32-bit vector
// offset (x86: one 16-lane vgatherdps, not two 8-lane vgatherqps on 64-bit
// lanes of index arithmetic); else the base and the 64-bit index.
llvm::Value* KernelEmitter::lane_pointers(const loop::Buffer& buf, const std::vector<loop::Expr>& indices,
                                          const Val& idx) {
  llvm::Type* st = storage_type(ctx_, buf.dtype);
  llvm::Value* base = buffer(buf).base;
  // (An affine index, base + stride * lane, stays as it is: its lane
  // offsets are a constant vector, which LLVM folds to 64 bits whatever
  // is done here.)
  if (!idx.base)
    if (const std::optional<loop::Expr> flat = loop::constant_flat_index(buf, indices)) {
      const auto [inv, offset] = split_terms(*flat, [&](const loop::Expr& x) { return lane_varying(x); });
      if (lane_varying(offset) && fits_i32(offset)) {
        llvm::Value* start = b_.CreateGEP(st, base, emit_scalar_expr(loop::simplify(inv), "an invariant index").v);
        // The GEP sign-extends the offset. Where LLVM proves it
        // non-negative it makes that a zext, which x86's instruction
        // selection does not narrow back (two 8-lane vgatherqps for a
        // padded convolution's clamped offsets); behind a freeze it stays
        // a sext, which selects vgatherdps.
        return b_.CreateGEP(st, start, b_.CreateFreeze(emit_i32(offset)));
      }
    }
  return b_.CreateGEP(st, base, splat(b_, idx.uniform() ? idx.base : idx.v, lanes_));
}

Val KernelEmitter::flat_index(const loop::Buffer& buf, const std::vector<loop::Expr>& indices) {
  const BufferInfo& info = buffer(buf);
  TS_CHECK(indices.size() == info.strides.size(), "cpu codegen: ", buf.name, " indexed with ", indices.size(),
           " indices, rank ", info.strides.size());
  Val flat = index_const(0);
  for (size_t d = 0; d < indices.size(); ++d) {
    Val term = emit_expr(indices[d]);
    llvm::Value* stride = info.strides[d];
    auto* k = llvm::dyn_cast<llvm::ConstantInt>(stride);
    if (!(k && k->isOne())) term = index_mul(term, scalar(stride));
    flat = d == 0 ? term : index_add(flat, term, false);
  }
  // Read through a reshape, the dims' indices divide and take remainders
  // that cancel in the flat index (floordiv(t, 14) * 14 + floormod(t, 14)
  // is t), but each dim's term varies across the lanes in no affine way and
  // the access would gather. The flat index folded (loop/affine.h) may be
  // affine again: then one vector load or store.
  if (lanes_ > 0 && !flat.base)
    if (const std::optional<loop::Expr> whole = loop::constant_flat_index(buf, indices)) {
      const loop::Expr folded = loop::fold_affine(*whole);
      if (loop::affine_form(folded)) {
        Val f = emit_expr(folded);
        if (f.base) return f;
      }
    }
  return flat;
}

llvm::Value* KernelEmitter::all_lanes_mask() const {
  return mask_ ? mask_ : llvm::ConstantInt::getTrue(with_lanes(llvm::Type::getInt1Ty(ctx_), lanes_));
}

// Loads whose lanes are at most this many elements apart are one wide load
// and a shuffle rather than a gather (emit_load).
constexpr int64_t kMaxShuffledStride = 4;

namespace {

bool clamped(const std::vector<loop::Expr>& indices) {
  bool any = false;
  for (const loop::Expr& i : indices)
    loop::visit_expr(i, [&](const loop::Expr& e) {
      any = any || (e->kind == loop::ExprKind::Binary &&
                    (e->binary == loop::BinaryOp::Min || e->binary == loop::BinaryOp::Max));
    });
  return any;
}

}  // namespace

// Under a select arm's lanes (arm_mask_) a load reads only those lanes,
// unless its indices are clamped: lowerings clamp an index that the other
// arm's lanes would take out of bounds, and masking such a gather only
// costs (LLVM then keeps its offsets in 64-bit lanes); nor is a load of one
// element for every lane (a masked one is a gather).
Val KernelEmitter::emit_load(const loop::ExprNode& n) {
  const auto varies = [&] {
    return std::any_of(n.args.begin(), n.args.end(), [&](const loop::Expr& i) { return lane_varying(i); });
  };
  if (arm_mask_ && !clamped(n.args) && varies()) {
    llvm::Value* outer = mask_;
    llvm::Value* arm = arm_mask_;
    mask_ = outer ? b_.CreateAnd(outer, arm) : arm;
    arm_mask_ = nullptr;
    Val v = emit_load(n);
    arm_mask_ = arm;
    mask_ = outer;
    return v;
  }
  const loop::Buffer& buf = *n.buffer;
  Val idx = flat_index(buf, n.args);
  llvm::Value* base = buffer(buf).base;
  llvm::Type* st = storage_type(ctx_, buf.dtype);
  const llvm::Align align = elem_align(module_, st);
  llvm::Value* stored = nullptr;
  if (lanes_ == 0 || (idx.uniform() && !mask_)) {
    stored = b_.CreateLoad(st, b_.CreateGEP(st, base, idx.uniform() ? idx.base : idx.v));
    llvm::cast<llvm::LoadInst>(stored)->setAlignment(align);
  } else if (idx.base && idx.stride == 1) {
    // Consecutive lanes read consecutive elements: one (unaligned) vector load.
    llvm::Type* vt = with_lanes(st, lanes_);
    llvm::Value* p = b_.CreateGEP(st, base, idx.base);
    if (mask_) {
      stored = b_.CreateMaskedLoad(vt, p, align, mask_, llvm::PoisonValue::get(vt));
    } else {
      auto* load = b_.CreateLoad(vt, p);
      load->setAlignment(align);
      stored = load;
    }
  } else if (idx.base && idx.stride >= 2 && idx.stride <= kMaxShuffledStride) {
    // Lanes s apart (a stride-2 convolution's taps): one load of the s * L
    // elements they span, the tail past the last lane's element masked off
    // (so nothing beyond it is read), and a shuffle of every s-th. A gather
    // costs about a load per lane: MobileNet's stride-2 depthwise
    // convolutions did nine a vector. Under a lane mask only the elements
    // of active lanes are read.
    const int64_t s = idx.stride;
    const int wide = static_cast<int>(s) * lanes_;
    std::vector<llvm::Constant*> live;
    for (int i = 0; i < wide; ++i) live.push_back(b_.getInt1(i <= (lanes_ - 1) * s));
    llvm::Value* span_mask = llvm::ConstantVector::get(live);
    if (mask_) {
      // wide lane i = s * l reads for lane l; the others read nothing
      std::vector<int> spread;
      for (int i = 0; i < wide; ++i) spread.push_back(i % s == 0 ? static_cast<int>(i / s) : lanes_);
      llvm::Value* none = llvm::ConstantInt::getFalse(with_lanes(b_.getInt1Ty(), lanes_));
      span_mask = b_.CreateShuffleVector(mask_, none, spread);
    }
    llvm::Value* span = b_.CreateMaskedLoad(with_lanes(st, wide), b_.CreateGEP(st, base, idx.base), align,
                                            span_mask, llvm::PoisonValue::get(with_lanes(st, wide)));
    std::vector<int> every;
    for (int l = 0; l < lanes_; ++l) every.push_back(static_cast<int>(l * s));
    stored = b_.CreateShuffleVector(span, every);
  } else {
    // Inactive lanes of a lane-varying If must not touch memory, so even a
    // uniform address is read through a masked gather there.
    llvm::Type* vt = with_lanes(st, lanes_);
    llvm::Value* ptrs = lane_pointers(buf, n.args, idx);
    stored = b_.CreateMaskedGather(vt, ptrs, align, all_lanes_mask(), llvm::PoisonValue::get(vt));
  }
  llvm::Value* v = from_storage(b_, buf.dtype, stored);
  return varying(v);
}

void KernelEmitter::emit_store(const loop::StmtNode& s) {
  const loop::Buffer& buf = *s.buffer;
  Val idx = flat_index(buf, s.indices);
  Val value = emit_expr(s.value);
  llvm::Value* base = buffer(buf).base;
  llvm::Type* st = storage_type(ctx_, buf.dtype);
  const llvm::Align align = elem_align(module_, st);
  if (lanes_ == 0 || (idx.uniform() && !mask_ && lanes_of(value.v) == 0)) {
    llvm::Value* p = b_.CreateGEP(st, base, idx.uniform() ? idx.base : idx.v);
    b_.CreateStore(to_storage(b_, buf.dtype, value.v), p)->setAlignment(align);
    return;
  }
  // Every lane writing one element is a reduction across lanes, which
  // sequential semantics would accumulate and a vector store would not.
  TS_CHECK(!(idx.uniform() && lanes_of(value.v) != 0), "cpu codegen: store to ", buf.name,
           " writes the same element from every lane of vectorized loop ", lane_var_,
           " (a reduction over the vectorized axis; vectorize another loop)");
  llvm::Value* data = to_storage(b_, buf.dtype, splat(b_, value.v, lanes_));
  if (idx.base && idx.stride == 1) {
    llvm::Value* p = b_.CreateGEP(st, base, idx.base);
    if (mask_)
      b_.CreateMaskedStore(data, p, align, mask_);
    else
      b_.CreateStore(data, p)->setAlignment(align);
    return;
  }
  // A constant non-zero stride gives distinct addresses; other indices are
  // scattered in lane order (the schedule guarantees they are distinct).
  llvm::Value* ptrs = lane_pointers(buf, s.indices, idx);
  b_.CreateMaskedScatter(data, ptrs, align, all_lanes_mask());
}

}  // namespace tessel::cpu::detail
