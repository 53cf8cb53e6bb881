// ftx convert-mesh-jax: flags only; the work is in lib/convert (see man/ftx-convert-mesh-jax.1).
#include <memory>

#include "cmd/convert_common.h"
#include "lib/convert/mesh_jax_source.h"

namespace {

ftx::cmd::Action setup(CLI::App* sub) {
  auto f = std::make_shared<ftx::cmd::ConvertFlags>();
  auto m = std::make_shared<ftx::MeshJaxOptions>();
  ftx::cmd::add_convert_flags(sub, *f);
  sub->add_option("--shards", m->shards, "shard_N folders (the training config's cores_per_replica)")->capture_default_str();
  sub->add_option("--head-num", m->head_num, "attention heads (n_heads)")->capture_default_str();
  sub->add_option("--rotary-dim", m->rotary_dim, "rotary dimensions per head (pe_rotary_dims)")->capture_default_str();
  sub->add_option("--max-seq-len", m->max_pos, "config.ini max_pos_seq_len (seq)")->capture_default_str();
  return [f, m] {
    ftx::cmd::check_range("--shards", m->shards, 1, ftx::cmd::kMaxRanks);
    ftx::cmd::check_range("--head-num", m->head_num, 1, ftx::cmd::kMaxFlagCount);
    ftx::cmd::check_range("--rotary-dim", m->rotary_dim, 1, ftx::cmd::kMaxFlagCount);
    ftx::cmd::check_range("--max-seq-len", m->max_pos, 1, ftx::cmd::kMaxFlagCount);
    return ftx::cmd::run_convert(
        *f, [m](const ftx::ConvertOptions& opt) { return ftx::plan_mesh_jax(opt, *m); },
        "a mesh-transformer-jax checkpoint");
  };
}

}  // namespace

FTX_SUBCOMMAND("convert-mesh-jax",
               "Convert a mesh-transformer-jax GPT-J slim checkpoint (step_N/shard_*/N.npz) to FasterTransformer's layout",
               setup);
