#include "cmd/parallel_flags.h"

namespace ftx::cmd {

void add_parallel_flags(CLI::App* sub, ParallelFlags& f) {
  sub->add_option("--tensor-para-size", f.tensor_para_size,
                  "Tensor-parallel ranks per pipeline stage (default: the number of ranks / --pipeline-para-size; "
                  "the model folder must be OUT/T-gpu)");
  sub->add_option("--pipeline-para-size", f.pipeline_para_size,
                  "Pipeline stages (default 1); rank r is TP rank r mod T of stage r / T, and stage p runs layers "
                  "[p*L/P, (p+1)*L/P)");
}

void apply_parallel_flags(const ParallelFlags& f, RuntimeOptions& o) {
  o.tensor_para_size = f.tensor_para_size;
  o.pipeline_para_size = f.pipeline_para_size;
}

}  // namespace ftx::cmd
