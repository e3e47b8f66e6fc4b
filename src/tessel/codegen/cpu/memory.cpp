// Loads and stores: row-major flattening, and the choice between a scalar
// access, one contiguous vector access, a short-stride span and a shuffle
// (loads), and a gather/scatter when widening.
#include "tessel/codegen/cpu/emitter.h"
#include "tessel/codegen/cpu/llvm_types.h"
#include "tessel/support/error.h"

namespace tessel::cpu::detail {

namespace {

llvm::Align elem_align(llvm::Module& m, llvm::Type* elem) {
  return m.getDataLayout().getABITypeAlign(elem);
}

}  // namespace

Val KernelEmitter::flat_index(const loop::Buffer& buf, const std::vector<loop::Expr>& indices) {
  const BufferInfo& info = buffer(buf);
  TS_CHECK(indices.size() == info.strides.size(), "cpu codegen: ", buf.name, " indexed with ", indices.size(),
           " indices, rank ", info.strides.size());
  Val flat = index_const(0);
  for (size_t d = 0; d < indices.size(); ++d) {
    Val term = emit_expr(indices[d]);
    llvm::Value* stride = info.strides[d];
    auto* k = llvm::dyn_cast<llvm::ConstantInt>(stride);
    if (!(k && k->isOne())) term = index_mul(term, Val{stride, stride, 0});
    flat = d == 0 ? term : index_add(flat, term, false);
  }
  return flat;
}

llvm::Value* KernelEmitter::all_lanes_mask() const {
  return mask_ ? mask_ : llvm::ConstantInt::getTrue(with_lanes(llvm::Type::getInt1Ty(ctx_), lanes_));
}

// Loads whose lanes are at most this many elements apart are one wide load
// and a shuffle rather than a gather (emit_load).
constexpr int64_t kMaxShuffledStride = 4;

Val KernelEmitter::emit_load(const loop::ExprNode& n) {
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
  } else if (idx.base && !mask_ && idx.stride >= 2 && idx.stride <= kMaxShuffledStride) {
    // Lanes s apart (a stride-2 convolution's taps): one load of the s * L
    // elements they span, the tail past the last lane's element masked off
    // (so nothing beyond it is read), and a shuffle of every s-th. A gather
    // costs about a load per lane: MobileNet's stride-2 depthwise
    // convolutions did nine a vector.
    const int64_t s = idx.stride;
    const int wide = static_cast<int>(s) * lanes_;
    std::vector<llvm::Constant*> live;
    for (int i = 0; i < wide; ++i) live.push_back(b_.getInt1(i <= (lanes_ - 1) * s));
    llvm::Value* span = b_.CreateMaskedLoad(with_lanes(st, wide), b_.CreateGEP(st, base, idx.base), align,
                                            llvm::ConstantVector::get(live), llvm::PoisonValue::get(with_lanes(st, wide)));
    std::vector<int> every;
    for (int l = 0; l < lanes_; ++l) every.push_back(static_cast<int>(l * s));
    stored = b_.CreateShuffleVector(span, every);
  } else {
    // Inactive lanes of a lane-varying If must not touch memory, so even a
    // uniform address is read through a masked gather there.
    llvm::Type* vt = with_lanes(st, lanes_);
    llvm::Value* ptrs = b_.CreateGEP(st, base, splat(b_, idx.uniform() ? idx.base : idx.v, lanes_));
    stored = b_.CreateMaskedGather(vt, ptrs, align, all_lanes_mask(), llvm::PoisonValue::get(vt));
  }
  llvm::Value* v = from_storage(b_, buf.dtype, stored);
  return lanes_of(v) == 0 ? Val{v, v, 0} : Val{v, nullptr, 0};
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
  llvm::Value* ptrs = b_.CreateGEP(st, base, splat(b_, idx.uniform() ? idx.base : idx.v, lanes_));
  b_.CreateMaskedScatter(data, ptrs, align, all_lanes_mask());
}

}  // namespace tessel::cpu::detail
