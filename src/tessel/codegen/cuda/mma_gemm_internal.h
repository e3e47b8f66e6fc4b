// Internals of the tensor-core GEMM (mma_gemm.h), shared by its files; not a
// public interface. In the order a Contract statement goes through them:
//   mma_gemm.cpp      the schedule (plan_mma_gemm): precision, operand loads,
//                     block tile, stages, wgmma / TMA
//   mma_kernel.cpp    the kernel body (MmaWriter): shared tiles, the main
//                     loops over K, mma.sync / wgmma; emit_mma_gemm
//   mma_operands.cpp  the operands from global memory into the shared tiles
//   mma_epilogue.cpp  the epilogue lambdas and the accumulators' way to them
//   mma_prelude.cpp   the device helpers the kernels call
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessel/codegen/cuda/emitter.h"
#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/loop/affine.h"
#include "tessel/loop/ir.h"

namespace tessel::cuda::detail {

// A row of a [rows][BK] shared tile (mma_gemm.cpp).
int64_t tile_row_bytes(const MmaTiles& t, MmaPrecision p);
// The flat index of `load` as an affine form of the loop variables
// (mma_gemm.cpp); nullopt when it is not one.
std::optional<loop::Affine> flat_affine(const loop::ExprNode& load);

// Writes one GEMM kernel body (see mma_gemm.h for the structure).
class MmaWriter {
  // One operand's way from memory to its shared tile.
  struct Side {
    const char* smem = "";    // the shared tile
    const char* reg = "";     // the registers between global and shared
    OperandLoad how = OperandLoad::Elements;
    int rows = 0;             // BM or BN
    bool k_major = true;      // Elements: consecutive threads along k
    std::string row_var;      // i or j
    const char* row0 = "";    // the tile's first row
    const char* extent = "";  // M or N
    const loop::Expr* value = nullptr;
    int units = 0;            // per thread: elements (pairs of halves) or vectors
    int vectors = 0;          // vectors per tile
    // Vectors: the element offset a step of k moves the flat index by (1
    // for VectorK, the row stride for VectorRows) when that index is affine;
    // nullopt for views whose runs are contiguous but jump between them
    // (heads split out of k), whose index is evaluated per K step.
    std::optional<int64_t> k_stride;
  };
 public:
  MmaWriter(const loop::StmtNode& s, const MmaPlan& p, CodeSink& out);
  void write();

 private:
  // The kernel's frame, main loops and multiplies (mma_kernel.cpp).
  void declare_shared();
  void registers_main_loop();
  void async_main_loop();
  void compute();
  void wgmma_compute();
  void half_fragments();
  void fragment(const char* big, const char* small, const char* tile, int q, const std::string& at);

  // The operands from global memory into the shared tiles (mma_operands.cpp).
  void unit_position(int rows, bool k_major);
  void load_tiles();
  void load_elements(const Side& x);
  void vector_position(const Side& x);
  std::string vector_source(const Side& x);
  void load_vectors(const Side& x);
  static std::string vector_slot(const Side& x);
  // A vector operand's shared tile as bytes: one stage, one of its rows,
  // and where its stages start in the dynamic shared memory.
  struct SharedLayout {
    int64_t stage = 0, row = 0, start = 0;
    int per_row = 0;  // vectors per tile row
  };
  SharedLayout shared_layout(const Side& x) const;
  void vector_sources(const Side& x);
  void copy_tiles(const std::string& stage);
  void store_tiles(const std::string& stage);

  // The accumulators to the epilogue (mma_epilogue.cpp).
  void shared_epilogue();
  void epilogue_calls();

  void line(const std::string& s) { out_.line(s); }

  void loop_nest(const std::vector<std::pair<const char*, int>>& loops, const std::function<void()>& body) {
    unrolled_loops(out_, loops, body);
  }

  loop::ContractView c_;
  const MmaPlan& p_;
  const MmaTiles& t_;
  CodeSink& out_;
  bool halves_ = false;
  std::optional<SplitEpilogue> split_;  // the epilogue's ts_epi_value / ts_epi_store
  const char* sm_ = "ts_dsmem";  // the byte array the pipeline's stages are offsets into
  int kpack_ = 1, units_per_row_ = 0, row_units_ = 0, wm_ = 0, wn_ = 0, mt_ = 0, nt_ = 0;
  Side a_, b_;
};

}  // namespace tessel::cuda::detail
