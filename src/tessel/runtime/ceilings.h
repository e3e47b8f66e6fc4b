// The machine's ceilings, measured, not assumed (`tessel ceilings`,
// docs/roofline.md): the fp32 FMA peak, the read bandwidth of each memory
// level and the cost of launching a parallel step, for one thread and for
// the thread count a model runs on. The per-kernel roofline of `tessel bench
// --profile` (runtime/roofline.h) divides each step's work by them.
//
// Each figure is the median of several timed samples after a warm-up, each
// sample calibrated to about `sample_seconds`. The machine may be shared: a
// sample in which a thread lost its core to another process is taken again,
// and the median ignores the few slow samples that remain.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

// One level of the memory hierarchy, for a thread count.
struct MemoryLevel {
  std::string name;       // "L1", "L2", "LLC" (last-level cache), "DRAM"
  int64_t capacity = 0;   // bytes the threads can hold at this level (L1, L2: per core x threads); 0: unbounded
  double read_bytes_per_s = 0;
};

// The ceilings of `threads` threads together.
struct CeilingSet {
  int threads = 1;
  double fma_flops_per_s = 0;       // fp32, two flops per lane of an FMA
  std::vector<MemoryLevel> levels;  // fastest first; the last (DRAM) is unbounded
  double launch_s = 0;              // one empty parallel_for on the runtime's pool of `threads`
};

struct CpuCeilings {
  std::string isa;  // the kernels' instruction set (runtime/ceiling_kernels.h)
  int lanes = 1;
  std::vector<CeilingSet> sets;  // threads 1, then the pool's thread count when it is more
  // Where and when they were measured (filled by the caller that caches them).
  std::string fingerprint, measured_at;
  double load_average = 0;  // the 1-minute load average when measured: a busy machine lowers them
  // Samples in which another process took a thread's core that still went
  // into a median, for want of clean ones: 0 on a quiet machine.
  int disturbed_samples = 0;

  // The set measured for `threads`; a tessel::Error when there is none.
  const CeilingSet& for_threads(int threads) const;
};

// What to measure: the thread count and the buffer of each level, sized from
// the cache sizes so that each level's reads hit it and not a faster one.
struct CeilingsPlan {
  int threads = 1;           // the pool's thread count; 1 is always measured too
  int64_t l1_bytes = 0;      // per core
  int64_t l2_bytes = 0;      // per core
  int64_t llc_bytes = 0;     // last-level cache, shared by the threads
  int64_t dram_bytes = 0;    // the DRAM buffer, split among the threads: several times the LLC
  double sample_seconds = 0.008;
  int samples = 5;
};

// The plan for a CPU with these caches: a half of L1 and of L2 per thread
// (room for the stack and the other cache lines), a quarter of the LLC
// shared (an LLC is shared with other cores, and on a virtual machine with
// other tenants), and 4 x the LLC of DRAM, at least 64 MiB, at most 1 GiB.
CeilingsPlan ceilings_plan(int threads, int64_t l1_bytes, int64_t l2_bytes, int64_t llc_bytes);

// Runs the calibrated kernels of host_ceiling_kernels() on this machine.
// Takes about 16 x samples x sample_seconds (under a second by default).
CpuCeilings measure_cpu_ceilings(const CeilingsPlan& plan);

}  // namespace tessel
