// Shared libraries opened at run time (libnvrtc, libcuda), so that one tessel
// build runs on machines with and without CUDA. A library, once opened,
// stays loaded for the life of the process: function pointers taken from it
// never dangle.
#pragma once

#include <string>
#include <vector>

namespace tessel::cuda::detail {

struct DynamicLibrary {
  void* handle = nullptr;
  std::string path;  // the candidate that loaded
  // Looks up a symbol; tessel::Error naming the library when it is missing.
  void* symbol(const char* name) const;
};

// Opens the first candidate that loads (names go through the dynamic
// loader's search, paths are opened as they are). Without success, handle
// is null and *errors lists each candidate's dlerror().
DynamicLibrary open_first(const std::vector<std::string>& candidates, std::string* errors);

// Candidates for a CUDA library: $<env_override> alone when that variable is
// set (tests use it to stand for a machine without the library); else the
// bare names, then (with `toolkit_folders`) the same names in the toolkit's
// library folders ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda). The driver is
// never looked up there: those folders hold only its link-time stub.
std::vector<std::string> cuda_library_candidates(const char* env_override, const std::vector<std::string>& names,
                                                 bool toolkit_folders);

}  // namespace tessel::cuda::detail
