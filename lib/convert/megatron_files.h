#pragma once
// Megatron-LM checkpoint folders: the iteration folder a path names, and its
// tensor x pipeline shard files (mp_rank_XX[_YYY] or tp_rank_XX_pp_rank_YYY). Shared by the
// legacy GPT adapter (megatron_source.cc) and the Megatron Core one (mcore_source.cc).
#include <cstdint>
#include <string>
#include <vector>

#include "formats/value.h"
#include "lib/convert/conversion.h"

namespace ftx {

struct MegatronShardFile {
  int64_t tp, pp;
  std::string dir_name, path;
};

// Entries of a folder, sorted; empty when it cannot be read.
std::vector<std::string> list_dir(const std::string& dir);
// The shard files directly under an iteration folder.
std::vector<MegatronShardFile> find_megatron_shards(const std::string& dir);
// The iteration folder: ROOT (with latest_checkpointed_iteration.txt), ITER itself (shards or a
// distributed checkpoint's .metadata), or a parent holding only one `release/` or `iter_XXXXXXX/`.
std::string resolve_megatron_iteration_dir(const std::string& in);
// The shard folder name of (tp, pp) in a checkpoint with `pp_size` pipeline stages.
std::string megatron_shard_name(int64_t tp, int64_t pp, int64_t pp_size);

// Megatron-LM `args` (an argparse.Namespace) fields; the default when absent or of another type.
ValuePtr megatron_arg(const ValuePtr& args, const char* key);
int64_t megatron_arg_int(const ValuePtr& args, const char* key, int64_t def);
bool megatron_arg_bool(const ValuePtr& args, const char* key, bool def);
double megatron_arg_double(const ValuePtr& args, const char* key, double def);
std::string megatron_arg_str(const ValuePtr& args, const char* key, const std::string& def);

// What FT's megatron_ckpt_convert.py writes beside the weights: vocab.json / merges.txt (from the
// options) and start/end ids (vocab.json["<|endoftext|>"], else 50256), has_adapters and
// adapter_inter_size in config.ini, and args.txt (`k:v` lines) when there are args.
void add_megatron_side_files(ConversionPlan& plan, const ConvertOptions& opt, const ValuePtr& args);

}  // namespace ftx
