// The driver: load a model, bind its symbolic dims, run the pass pipeline,
// and execute it on a target. `tessel run`, `tessel test-onnx` and `tessel
// demo` are thin layers over these functions.
//
// Symbol binding order: the shapes of the inputs the user gives come first;
// then --dim (a --dim that disagrees with an input's shape is an error); any
// symbol of an input the user did not give that is still unbound is set to 1,
// with a note on the log stream.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tessel/driver/options.h"
#include "tessel/ir/graph.h"
#include "tessel/ops/registry.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {

// Reads --input NAME=FILE.npy bindings against the graph's declared input
// types (the declared dtype decides how raw 'V' data is read). Unknown names,
// duplicates and dtype mismatches are errors.
std::map<std::string, RtValue> read_input_files(const Graph& g,
                                                const std::vector<std::pair<std::string, std::string>>& files);

// Computes the symbol bindings (see the header comment). `given` maps input
// names to values; each is checked against its declared type.
std::map<std::string, int64_t> bind_symbols(const Graph& g, const std::map<std::string, RtValue>& given,
                                            const std::map<std::string, int64_t>& cli_dims, std::ostream* notes);

// On the compiled target, given inputs that only steer shapes (axes, target
// shapes, slice bounds) become constants before compilation, so that the
// kernels' sizes are known; see passes/bind_shape_inputs.cpp.
void fold_shape_inputs(Model& m, const std::map<std::string, RtValue>& given, Target t);

// The pipeline's options for the target, precision, passes and printing of
// `o` and the symbol values `dims`.
PassOptions pipeline_options(const std::map<std::string, int64_t>& dims, const DriverOptions& o);
// Runs the graph pass pipeline with pipeline_options(dims, o).
void compile_model(Model& m, const std::map<std::string, int64_t>& dims, const DriverOptions& o);

// Inputs in graph order: the given ones, seeded random values for the rest
// (see random_inputs.h). Notes which inputs were generated.
std::vector<RtValue> assemble_inputs(const Graph& g, const std::map<std::string, RtValue>& given,
                                     const std::map<std::string, int64_t>& dims, uint64_t seed, std::ostream* notes);

struct ExecResult {
  std::vector<RtValue> outputs;  // in graph output order
  double time_ms = 0;            // the run alone
  double compile_s = 0;          // code generation (Target::Cpu)
  // Operators (domain-qualified when not ai.onnx) that ran on the
  // interpreter: on the reference target every op, subgraphs included.
  std::vector<std::string> interpreter_ops;
};

// Executes the model (after compile_model) on the target: Reference runs the
// interpreter, Cpu compiles kernels (driver/compiler.h) and runs them.
ExecResult execute(const Model& m, const std::vector<RtValue>& inputs, Target t, int threads = 0);

// "f32[1,1000]", "seq<3 x f32>", "none".
std::string describe_value(const RtValue& v);
// A few values of a tensor: "[0.1, -0.25, ..., 3]".
std::string preview_values(const Tensor& t, int max_values = 6);

}  // namespace tessel
