// Loading compiled artifacts (`tessel compile MODEL -o FILE`) with the
// runtime alone: no LLVM, no protobuf, no compiler. The kernels' object is
// linked by runtime/object_loader.h, the model's IR parsed by ir/parser.h,
// interpreter steps run by the interpreter; the CPU features the code was
// compiled for are checked with CPUID (runtime/cpu_features.h) before any
// kernel code is loaded. driver/artifact.h makes and writes artifacts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/runtime/artifact_format.h"
#include "tessel/runtime/executable.h"
#include "tessel/runtime/step.h"

namespace tessel {

// True when the file starts with the artifact magic (a missing or unreadable
// file is not an artifact; loading it reports why).
bool is_artifact_file(const std::string& path);

// True when the file's header says it is a CUDA artifact (its cuda section
// is not empty); nothing else is checked until it is loaded.
bool is_cuda_artifact_file(const std::string& path);

// Maps and decodes an artifact file (tessel::Error on any damage). The
// result owns the mapping (`storage`); constants are views into it.
ArtifactContents read_artifact(const std::string& path);

// The model an artifact holds (no kernel code is touched).
std::unique_ptr<Model> artifact_model(const ArtifactContents& a);

// The graph's nodes in the order an artifact's steps index them.
std::vector<const Node*> artifact_nodes(const Graph& g);

// The executable's steps an artifact lists, over `g` (its artifact_model's
// graph); kernel steps without code (the loader fills in their functions).
std::vector<Step> artifact_steps(const ArtifactContents& a, const Graph& g);

// "cpu (znver3)" or "cuda (sm_90a, sm_80)": what an artifact was compiled for.
std::string artifact_target(const ArtifactContents& a);

// tessel::Error naming the features the artifact's code was compiled for
// that `host` ("+a,-b,..." as detected_cpu_features()) lacks. Features CPUID
// detection does not cover are not checked (cpu_feature_detectable).
void check_artifact_cpu(const ArtifactContents& a, const std::string& host);

// An executable from a CPU artifact (a CUDA one is refused: load it with
// runtime/cuda/gpu_artifact.h). Refuses, before loading any kernel code,
// when this CPU lacks a feature the code was compiled for.
std::unique_ptr<Executable> load_artifact(const std::string& path, const ExecutableOptions& o);
// The same from contents already read (read_artifact); the model borrows its
// weights from `a.storage`, which it keeps alive.
std::unique_ptr<Executable> load_artifact(const ArtifactContents& a, const ExecutableOptions& o,
                                          const std::string& source_path = "");

}  // namespace tessel
