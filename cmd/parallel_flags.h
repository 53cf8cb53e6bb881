#pragma once
// --tensor-para-size / --pipeline-para-size: FT's TP × PP rank grid, the vocabulary-parallel
// embedding's flags (lib/engine/embedding_sharding.h) and --verbose (what each rank's weights hold),
// shared by generate, chat, eval-lambada and eval-summarize (one definition, so their meaning
// cannot drift). See lib/dist/parallel.h.
#include "cmd/subcommand.h"
#include "lib/engine/runtime.h"

namespace ftx::cmd {

struct ParallelFlags {
  int tensor_para_size = 0;    // 0: ranks / pipeline_para_size
  int pipeline_para_size = 0;  // 0: 1
  bool use_parallel_embedding = false, use_embedding_sharing = false;
  int embedding_sharding_dim = -1;  // -1: not given (0)
  bool verbose = false;
};

void add_parallel_flags(CLI::App* sub, ParallelFlags& f);

// Copies the flags into the runtime options.
void apply_parallel_flags(const ParallelFlags& f, RuntimeOptions& o);

}  // namespace ftx::cmd
