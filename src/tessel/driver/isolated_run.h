// Jobs that may crash the process, run in forked children: the tuner's
// candidate kernels (driver/tuner.cpp). A candidate is generated code; one
// that faults (an LLVM miscompile, a bad index the checks missed) must cost
// that candidate, not the search.
//
// run_isolated forks a child that runs the jobs in order and reports each
// result through a pipe as it finishes. When the child dies before it has
// reported every job, the first unreported job is the one that killed it:
// it is marked crashed (with the signal), and the jobs after it run in a
// new child. The parent keeps no state of the children: their memory
// writes (buffers, caches) are lost with them, results excepted.
//
// The child starts with the forking thread only: a thread pool of the
// parent has no workers there, so `child_main` makes its own. It must not
// take locks that another parent thread may have held at the fork (malloc's
// are reset by the C library; logging streams are not safe), and it ends
// with _exit, which skips destructors and atexit handlers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace tessel {

struct IsolatedResult {
  bool reported = false;  // the child finished the job (else: not run, or it crashed)
  bool crashed = false;   // the child died running it
  int signal = 0;         // what killed it (0: it exited)
  int32_t code = 0;       // the job's own outcome (child_main decides)
  double value = 0;       // a measurement
};

// Reports job `index`'s outcome (from inside the child).
using ReportFn = std::function<void(size_t index, int32_t code, double value)>;

// Runs child_main(todo, report) in forked children until every job of
// `jobs` has been reported or has crashed; returns the results indexed like
// `jobs`' values (size: the largest index + 1). Throws tessel::Error when
// fork or pipe fail.
std::vector<IsolatedResult> run_isolated(const std::vector<size_t>& jobs,
                                         const std::function<void(const std::vector<size_t>&, const ReportFn&)>& child_main);

}  // namespace tessel
