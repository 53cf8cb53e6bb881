#pragma once
// What a run's results depend on besides each request, which --resume compares with the header of
// OUT.partial.index (formats/output_file.h's ResultJournal): the model folder's contents, the
// device, the arithmetic (--dtype resolved to the device's default, --int8-mode and its variants,
// --int8-kv-cache, --fp8, --fp8-kv-cache) and the tensor-parallel size (its all-reduces sum in
// another order). Each request's own parameters are in its fingerprint (generate_io.h), so
// sampling flags, stop words and end ids are checked there. Left out on purpose, because they do
// not change what a request computes: --threads, --batch-size, --batching, --tokens-per-block,
// --kv-cache-memory, --no-prefix-cache, --gemm-config and the pipeline-parallel size (the man pages
// say so). A command adds its own keys (generate: --memory-len and the result line's shape).
#include <string>

#include <nlohmann/json.hpp>

#include "lib/dist/parallel.h"
#include "lib/engine/runtime.h"

namespace ftx {

nlohmann::ordered_json run_identity(const std::string& model_dir, const RuntimeOptions& runtime,
                                    const dist::ParallelLayout& layout);

}  // namespace ftx
