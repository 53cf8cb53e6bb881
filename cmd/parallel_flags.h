#pragma once
// --tensor-para-size / --pipeline-para-size: FT's TP × PP rank grid, shared by generate, chat and
// eval-lambada (one definition, so their meaning cannot drift). See lib/dist/parallel.h.
#include "cmd/subcommand.h"
#include "lib/engine/runtime.h"

namespace ftx::cmd {

struct ParallelFlags {
  int tensor_para_size = 0;    // 0: ranks / pipeline_para_size
  int pipeline_para_size = 0;  // 0: 1
};

void add_parallel_flags(CLI::App* sub, ParallelFlags& f);

// Copies the flags into the runtime options.
void apply_parallel_flags(const ParallelFlags& f, RuntimeOptions& o);

}  // namespace ftx::cmd
