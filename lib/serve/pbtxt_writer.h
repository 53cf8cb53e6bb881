#pragma once
// Pieces of Triton's config.pbtxt (the text form of its ModelConfig protobuf) shared by the
// FasterTransformer model's config (triton_config.h) and the ensemble's (triton_ensemble.h).
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lib/serve/triton_config.h"

namespace ftx::serve::pbtxt {

// A text-format string literal: quotes, backslashes and control bytes escaped.
std::string quoted(const std::string& s);
// `field [ {tensor}, ... ]` (field: "input" or "output").
void write_tensors(std::ostringstream& o, const char* field, const std::vector<TritonTensor>& ts);
// `parameters { key: ... value: { string_value: ... } }`.
void write_parameter(std::ostringstream& o, const char* key, const std::string& value);
// One instance on the CPU.
void write_cpu_instance(std::ostringstream& o);

}  // namespace ftx::serve::pbtxt
