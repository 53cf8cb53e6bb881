#pragma once
// ModelRun: the set-up the decoding commands share (ftx generate, eval-lambada, chat): the runtime
// (backend, communicator, quantisation policy), this rank's weights of the model folder, the engine
// over them and, for the commands that stream requests, the scheduler. The commands differ in what
// they read and write around it; the set-up, and the rule that a rank which fails to start stops
// every rank, are here once.
//
// In order: the constructor makes the runtime; load() the weights (and the command's own start, on
// every rank at once); start_engine(); start_scheduler(). Members are released in the reverse order
// (the scheduler before the engine, the engine before the weights, the weights before the backend).
#include <functional>
#include <memory>
#include <string>

#include "lib/dist/communicator.h"
#include "lib/dist/parallel.h"
#include "lib/engine/engine.h"
#include "lib/engine/engine_options.h"
#include "lib/engine/model_weights.h"
#include "lib/engine/runtime.h"
#include "lib/engine/scheduler.h"
#include "lib/ops/backend.h"

namespace ftx {

class ModelRun {
 public:
  // make_runtime(options) (its UsageErrors and Errors as they are); the model folder is
  // options.model_dir.
  explicit ModelRun(const RuntimeOptions& options);
  ModelRun(const ModelRun&) = delete;
  ModelRun& operator=(const ModelRun&) = delete;

  // Loads this rank's weights, quantised as the runtime's policy says, then runs `then` (the
  // command's own start, such as rank 0 opening its input and output). An Error on any rank stops
  // every rank before any goes on: the rank that failed with its own message, the others with
  // `elsewhere` (for instance "another rank failed to start (see its error)"). A UsageError is
  // thrown as it is, at once.
  void load(const std::string& elsewhere, const std::function<void()>& then = {});
  // The engine over the weights (after load()).
  Engine& start_engine(const EngineOptions& options);
  // A scheduler over the engine (after start_engine()); its max_positions is the model's (the rows
  // of a learned position table, none otherwise).
  Scheduler& start_scheduler(SchedulerOptions options);

  const Runtime& runtime() const { return rt_; }
  ops::Backend& backend() { return *rt_.backend; }
  dist::Communicator& comm() { return *rt_.comm; }
  const dist::ParallelLayout& layout() const { return rt_.layout(); }
  const ModelWeights& weights() const { return weights_; }

 private:
  std::string model_dir_;
  Runtime rt_;
  ModelWeights weights_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace ftx
