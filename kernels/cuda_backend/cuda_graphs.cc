// CudaBackend's repeated steps as CUDA graphs (CudaBackendOptions::graphs): a step's first run is
// eager and measures its metadata, the second is captured, later ones copy their metadata into
// the fixed buffer the graph reads and replay it. Memory whose address a graph holds is released
// only after the graphs that hold it are retired.
#include <cstring>
#include <string>
#include <vector>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"

namespace ftx::cuda {

void CudaBackend::check_not_in_step(const char* op) const {
  if (step_mode_ != StepMode::kOff)
    throw Error(std::string("CUDA backend: ") + op + " inside a repeatable step (the engine must finish the step first)");
}

size_t CudaBackend::graphs_recorded() const {
  size_t n = 0;
  for (const auto& [key, st] : steps_) n += st.exec != nullptr;
  return n;
}

void CudaBackend::ensure_step_meta(size_t bytes) {
  if (bytes <= step_meta_cap_) return;
  // The device buffer's address is inside every recorded graph: a new one retires them all (they
  // are captured again, their measurements kept).
  retire_graphs();
  synchronize();  // no copy reads the old host buffer, no graph the old device one
  step_meta_pending_ = false;
  if (step_meta_host_) FTX_CUDA_CHECK(cudaFreeHost(step_meta_host_));
  step_meta_host_ = nullptr;
  arena_.release(step_meta_dev_);
  step_meta_dev_ = nullptr;
  step_meta_cap_ = 0;
  const size_t cap = std::max(round_up(bytes, 4096), size_t(64) << 10);
  FTX_CUDA_CHECK(cudaMallocHost(&step_meta_host_, cap));
  step_meta_dev_ = arena_.allocate(cap);
  step_meta_cap_ = cap;
  if (!step_meta_copied_) FTX_CUDA_CHECK(cudaEventCreateWithFlags(&step_meta_copied_, cudaEventDisableTiming));
}

std::vector<const void*> CudaBackend::stage_step(std::initializer_list<Part> parts) {
  std::vector<const void*> out;
  out.reserve(parts.size());
  for (const Part& p : parts) {
    if (p.bytes == 0 || !p.data) {
      out.push_back(nullptr);
      continue;
    }
    const size_t len = round_up(p.bytes, 16);
    // The same ops in the same order as the measured run: more bytes means another sequence.
    if (step_meta_off_ + len > step_->meta_bytes || step_meta_off_ + len > step_meta_cap_)
      throw Error("CUDA backend: a repeated step staged more metadata than its first run (" +
                  std::to_string(step_meta_off_ + len) + " > " + std::to_string(step_->meta_bytes) +
                  " bytes): its ops differ from the recorded ones");
    std::memcpy(static_cast<char*>(step_meta_host_) + step_meta_off_, p.data, p.bytes);
    out.push_back(static_cast<char*>(step_meta_dev_) + step_meta_off_);
    step_meta_off_ += len;
  }
  return out;
}

void CudaBackend::begin_repeatable(const std::string& key) {
  if (!graphs_) return;
  check_not_in_step("begin_repeatable");
  StepGraph& st = steps_[key];
  step_ = &st;
  step_meta_off_ = 0;
  if (!st.measured) {
    step_mode_ = StepMode::kMeasure;
    return;
  }
  ensure_step_meta(st.meta_bytes);  // before capture: it may allocate and synchronise
  if (step_meta_pending_) {  // the host buffer is rewritten below: the last step's copy must have read it
    FTX_CUDA_CHECK(cudaEventSynchronize(step_meta_copied_));
    step_meta_pending_ = false;
  }
  if (st.exec) {
    step_mode_ = StepMode::kReplay;
    return;
  }
  step_allocations_ = arena_.allocations();
  // Relaxed: the ops' host code may call CUDA APIs that are not stream work (cudaFuncSetAttribute).
  FTX_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  step_mode_ = StepMode::kCapture;
}

void CudaBackend::launch_step(cudaGraphExec_t exec) {
  if (step_meta_off_ > 0) {
    FTX_CUDA_CHECK(cudaMemcpyAsync(step_meta_dev_, step_meta_host_, step_meta_off_, cudaMemcpyHostToDevice, stream_));
    FTX_CUDA_CHECK(cudaEventRecord(step_meta_copied_, stream_));
    step_meta_pending_ = true;
  }
  FTX_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
}

void CudaBackend::end_repeatable() {
  const StepMode mode = step_mode_;
  step_mode_ = StepMode::kOff;
  StepGraph* st = step_;
  step_ = nullptr;
  switch (mode) {
    case StepMode::kOff:
      return;
    case StepMode::kMeasure:
      st->measured = true;
      st->meta_bytes = step_meta_off_;
      return;
    case StepMode::kReplay:
      if (step_meta_off_ != st->meta_bytes)
        throw Error("CUDA backend: a repeated step staged " + std::to_string(step_meta_off_) +
                    " bytes of metadata, its recording " + std::to_string(st->meta_bytes) +
                    ": its ops differ from the recorded ones");
      launch_step(st->exec);
      return;
    case StepMode::kCapture: {
      cudaGraph_t graph = nullptr;
      FTX_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      FTX_CUDA_CHECK(e);
      st->meta_bytes = step_meta_off_;
      launch_step(exec);
      if (arena_.allocations() == step_allocations_) {
        st->exec = exec;
      } else {  // addresses taken during the capture may be handed out again: run it this once only
        FTX_CUDA_CHECK(cudaGraphExecDestroy(exec));
      }
      finish_deferred_releases();
      return;
    }
  }
}

void CudaBackend::abort_repeatable() {
  if (step_mode_ == StepMode::kCapture) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);  // the error that aborted the step is the one to report
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
  }
  step_mode_ = StepMode::kOff;
  step_ = nullptr;
  try {  // called from destructors (RepeatableStep): an error here must not escape
    finish_deferred_releases();
  } catch (const std::exception&) {
  }
}

void CudaBackend::release_graph_memory(void* p) {
  if (!p) return;
  if (step_mode_ == StepMode::kCapture) {
    // No synchronising inside a capture: the buffer is released, and the graphs holding it retired,
    // when the capture ends (finish_deferred_releases). The graph being captured allocates, so it
    // runs once and is not kept (end_repeatable).
    deferred_releases_.push_back(p);
    return;
  }
  retire_graphs();   // synchronises first when a graph exists: none can run with the address again
  arena_.release(p);  // eager work still queued on the stream runs before any reuse (stream order)
}

void CudaBackend::finish_deferred_releases() {
  if (deferred_releases_.empty()) return;
  retire_graphs();
  for (void* p : deferred_releases_) arena_.release(p);
  deferred_releases_.clear();
}

void CudaBackend::retire_graphs() {
  bool any = false;
  for (auto& [key, st] : steps_) any |= st.exec != nullptr;
  if (any) synchronize();  // a launched graph may still run
  for (auto& [key, st] : steps_) {
    if (st.exec) cudaGraphExecDestroy(st.exec);
    st.exec = nullptr;
  }
}

void CudaBackend::forget_repeatables() {
  if (step_mode_ != StepMode::kOff) abort_repeatable();
  retire_graphs();
  steps_.clear();
}
}  // namespace ftx::cuda
