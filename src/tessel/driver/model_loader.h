// Loading a model file, whatever its format: ONNX protobuf (.onnx), tessel's
// text IR (.tir), and compiled artifacts (told apart by magic bytes; loading
// one here gives its model, see driver/artifact.h for its executable).
#pragma once

#include <memory>
#include <string>

#include "tessel/ir/graph.h"

namespace tessel {

enum class ModelFormat { Onnx, TextIR, Artifact };

// Decides the format from the first bytes and the file name: the artifact
// magic wins, then a `.tir` extension (or text that starts like the text IR),
// else ONNX.
ModelFormat detect_model_format(const std::string& path, const std::string& head);

// Loads a model. Throws tessel::Error without a file prefix (the CLI adds
// "error: <file>: "): missing file, directory, empty file, and every import
// or parse error.
std::unique_ptr<Model> load_model(const std::string& path);

// Loads a model from bytes in memory: ONNX protobuf or the text IR (not an
// artifact: those load from their file). ONNX external data cannot be
// found from bytes and is an error.
std::unique_ptr<Model> load_model_bytes(const std::string& bytes);

}  // namespace tessel
