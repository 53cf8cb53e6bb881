#include "cmd/parallel_flags.h"

namespace ftx::cmd {

void add_parallel_flags(CLI::App* sub, ParallelFlags& f) {
  sub->add_option("--tensor-para-size", f.tensor_para_size,
                  "Tensor-parallel ranks per pipeline stage (default: the number of ranks / --pipeline-para-size; "
                  "the model folder must be OUT/T-gpu)");
  sub->add_option("--pipeline-para-size", f.pipeline_para_size,
                  "Pipeline stages (default 1); rank r is TP rank r mod T of stage r / T, and stage p runs layers "
                  "[p*L/P, (p+1)*L/P)");
  sub->add_flag("--use-parallel-embedding", f.use_parallel_embedding,
                "Each TP rank holds a slice of the embedding table and of the lm_head instead of the whole of them "
                "(TensorRT-LLM's --use_parallel_embedding); lookups and logits are joined over the ranks");
  sub->add_option("--embedding-sharding-dim", f.embedding_sharding_dim,
                  "With --use-parallel-embedding: 0 splits the embedding table by vocabulary rows (default), 1 by "
                  "hidden columns (the lm_head is split by vocabulary rows either way)")
      ->check(CLI::IsMember({0, 1}));
  sub->add_flag("--use-embedding-sharing", f.use_embedding_sharing,
                "A tied model's lm_head reads the embedding table's own slice instead of a copy (TensorRT-LLM's "
                "--use_embedding_sharing; under TP needs --use-parallel-embedding --embedding-sharding-dim 0)");
  sub->add_flag("--verbose", f.verbose,
                "Each rank prints to stderr the bytes its embedding table, lm_head and weights take");
}

void apply_parallel_flags(const ParallelFlags& f, RuntimeOptions& o) {
  o.tensor_para_size = f.tensor_para_size;
  o.pipeline_para_size = f.pipeline_para_size;
  o.use_parallel_embedding = f.use_parallel_embedding;
  o.embedding_sharding_dim = f.embedding_sharding_dim;
  o.use_embedding_sharing = f.use_embedding_sharing;
  o.verbose = f.verbose;
}

}  // namespace ftx::cmd
