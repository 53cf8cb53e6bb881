#pragma once
// Megatron Core's output layer when the arguments say it shares the word embeddings
// (share_embeddings_and_output_weights, i.e. no --untie-embeddings-and-output-weights): the first
// pipeline stage holds no output_layer.weight then (megatron-core does not allocate it), a later
// last stage holds a copy of the embeddings kept equal by training, and a distributed checkpoint
// stores the pair once. So an output_layer.weight equal to the word embeddings is that copy and is
// dropped (the converted model is the same either way), while one that differs says the model was
// trained untied and the arguments are wrong: megatron-core, and NeMo on top of it, would refuse to
// load it into a tied model (an unexpected key), so ftx refuses it too, naming the argument to fix,
// rather than silently using the embeddings as the output layer or keeping a tensor the config.ini
// it writes would call tied.
#include <string>

#include "formats/tensor.h"
#include "lib/convert/dcp_shards.h"
#include "lib/convert/mcore_model.h"

namespace ftx {

// Whether two tensors hold the same dtype, shape and bytes.
bool same_tensor_values(const TensorView& a, const TensorView& b);
// The same for two tensors of a distributed checkpoint, split along axis 0 (the vocabulary).
bool same_tensor_values(const ChunkViews& a, const ChunkViews& b, const std::vector<int64_t>& shape,
                        const std::string& what);

// The error for an output layer that differs from the embeddings of a tied model (see above).
[[noreturn]] void refuse_untied_output_layer(const McoreArgs& a, const std::string& origin);

}  // namespace ftx
