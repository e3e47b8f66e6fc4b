#include "tessel/codegen/cuda/gpu_runner.h"

#include <climits>

#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/codegen/cuda/tensor_map.h"
#include "tessel/loop/eval.h"
#include "tessel/support/error.h"

namespace tessel::cuda {

namespace {

// Launch extents evaluated over the syms; false when one is empty (nothing to run).
bool launch_dims(const LaunchGeometry& g, const std::map<std::string, int64_t>& syms, Dim3* grid, Dim3* block) {
  auto dim = [&](const loop::Expr& e, const char* what) -> unsigned {
    const int64_t v = loop::eval_index(e, syms);
    TS_CHECK(v <= UINT_MAX, "CUDA launch: ", what, " extent ", v, " is too large");
    return v <= 0 ? 0u : static_cast<unsigned>(v);
  };
  *grid = {dim(g.grid[0], "grid"), dim(g.grid[1], "grid"), dim(g.grid[2], "grid")};
  *block = {dim(g.block[0], "block"), dim(g.block[1], "block"), dim(g.block[2], "block")};
  return grid->x && grid->y && grid->z && block->x && block->y && block->z;
}

size_t buffer_bytes(const loop::Buffer& b, const std::map<std::string, int64_t>& syms) {
  int64_t n = 1;
  for (const loop::Expr& d : b.shape) n = checked_mul(n, std::max<int64_t>(0, loop::eval_index(d, syms)));
  return static_cast<size_t>(checked_mul(n, static_cast<int64_t>(dtype_storage_size(b.dtype))));
}

}  // namespace

GpuKernels::GpuKernels(std::vector<loop::Kernel> kernels, const std::string& cache_dir)
    : GpuKernels(std::move(kernels), gemm_target_for(device_arch()), cache_dir) {}

GpuKernels::GpuKernels(std::vector<loop::Kernel> kernels, const GemmTarget& gemm, const std::string& cache_dir)
    : kernels_(std::move(kernels)), source_(emit_cuda_source(kernels_, gemm)) {
  NvrtcOptions o;
  o.arch = device_arch();
  o.cache_dir = cache_dir;
  Cubin c = compile_to_cubin(source_.code, o);
  from_cache_ = c.from_cache;
  module_ = std::make_unique<Module>(c.image);
}

int32_t GpuKernels::run(const std::string& name, const std::vector<void*>& buffers, const std::vector<int64_t>& syms) {
  size_t ki = 0;
  while (ki < kernels_.size() && kernels_[ki].name != name) ++ki;
  TS_CHECK(ki < kernels_.size(), "CUDA: no kernel named ", name);
  const loop::Kernel& k = kernels_[ki];
  TS_CHECK(buffers.size() == k.params.size(), "CUDA: kernel ", name, " takes ", k.params.size(), " buffers, got ",
           buffers.size());
  TS_CHECK(syms.size() == k.syms.size(), "CUDA: kernel ", name, " takes ", k.syms.size(), " syms, got ", syms.size());
  std::map<std::string, int64_t> sym_values;
  for (size_t i = 0; i < syms.size(); ++i) sym_values[k.syms[i]] = syms[i];
  Dim3 grid, block;
  if (!launch_dims(source_.kernels[ki].launch, sym_values, &grid, &block)) return 0;

  Stream stream;
  std::vector<std::unique_ptr<DeviceMemory>> mem;
  std::vector<size_t> bytes;
  for (size_t i = 0; i < k.params.size(); ++i) {
    bytes.push_back(buffer_bytes(*k.params[i], sym_values));
    mem.push_back(std::make_unique<DeviceMemory>(bytes.back()));
    // Outputs too: elements a kernel does not write keep their host values.
    stream.upload(*mem.back(), buffers[i], bytes.back());
  }
  DeviceMemory error(sizeof(int32_t));
  stream.fill(error, 0, sizeof(int32_t));

  std::vector<uint64_t> ptrs;
  for (const auto& m : mem) ptrs.push_back(m->ptr());
  std::vector<long long> sym_args(syms.begin(), syms.end());
  uint64_t error_ptr = error.ptr();
  std::vector<void*> args;
  for (uint64_t& p : ptrs) args.push_back(&p);
  for (long long& s : sym_args) args.push_back(&s);
  args.push_back(&error_ptr);
  std::vector<TensorMap> maps = encode_tensor_maps(source_.kernels[ki].tensor_maps, ptrs, sym_values, name);
  for (TensorMap& m : maps) args.push_back(&m);
  const LaunchGeometry& geo = source_.kernels[ki].launch;
  launch(prepare_function(*module_, launch_symbol(source_.kernels[ki], syms), geo.shared_bytes), grid, block,
         args.data(), stream, geo.shared_bytes);

  for (size_t i = k.num_inputs; i < k.params.size(); ++i) stream.download(buffers[i], *mem[i], bytes[i]);
  int32_t rc = 0;
  stream.download(&rc, error, sizeof rc);
  stream.synchronize();
  return rc;
}

}  // namespace tessel::cuda
