#include "lib/engine/model_run.h"

#include <cstdio>

#include "formats/error.h"

namespace ftx {

ModelRun::ModelRun(const RuntimeOptions& options) : model_dir_(options.model_dir), rt_(make_runtime(options)) {}

void ModelRun::load(const std::string& elsewhere, const std::function<void()>& then) {
  // A rank that fails must not leave the others waiting in a collective: every rank learns whether
  // all of them started before any goes on.
  std::string failure;
  try {
    weights_ = ModelWeights::load(model_dir_, rt_.layout(), *rt_.backend, rt_.quant, rt_.embedding);
    // Each rank its own line, whole (the ranks' lines interleave in any order).
    if (rt_.verbose)
      std::fprintf(stderr, "ftx: rank %d (%s, TP rank %d, stage %d): %s\n", rt_.layout().rank,
                   rt_.layout().describe().c_str(), rt_.layout().tp_rank(), rt_.layout().stage(),
                   weights_.table_report().c_str());
    if (then) then();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    failure = e.what();
  }
  if (!rt_.comm->all_true(failure.empty())) throw Error(failure.empty() ? elsewhere : failure);
}

Engine& ModelRun::start_engine(const EngineOptions& options) {
  engine_ = std::make_unique<Engine>(weights_, *rt_.backend, *rt_.groups, options);
  return *engine_;
}

Scheduler& ModelRun::start_scheduler(SchedulerOptions options) {
  const ModelConfig& cfg = weights_.config();
  options.max_positions = cfg.position == PositionEmbedding::kLearned ? cfg.max_pos_seq_len : 0;
  scheduler_ = std::make_unique<Scheduler>(*engine_, *rt_.comm, options);
  return *scheduler_;
}

}  // namespace ftx
