#pragma once
// GPT-J from EleutherAI's mesh-transformer-jax "slim" checkpoint (slim_model.py's step_N/ folder:
// shard_0 .. shard_{S-1}, one per model-parallel core, each holding the flattened parameter pytree
// split over numbered np.savez files 0.npz, 1.npz, ...). What FasterTransformer's
// examples/pytorch/gptj/utils/gptj_ckpt_convert.py converts, without its hardcoded GPT-J-6B shape:
// sizes come from the arrays; what the arrays cannot say (heads, rotary dims, positions) from
// MeshJaxOptions, whose defaults are GPT-J-6B's (configs/6B_roto_256.json).
#include <cstdint>

#include "lib/convert/conversion.h"

namespace ftx {

struct MeshJaxOptions {
  int64_t shards = 8;        // cores_per_replica: the shard_N folders
  int64_t head_num = 16;     // n_heads
  int64_t rotary_dim = 64;   // pe_rotary_dims
  int64_t max_pos = 2048;    // seq: config.ini max_pos_seq_len
};

ConversionPlan plan_mesh_jax(const ConvertOptions& opt, const MeshJaxOptions& m);

}  // namespace ftx
