// NcclCommunicator (see nccl_communicator.h): NCCL all-reduce on device buffers, everything else
// through the host (MPI) communicator it was built from.
#include "kernels/cuda_backend/nccl_communicator.h"

#ifdef FTX_HAVE_NCCL

#include <nccl.h>

#include <string>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/cuda_backend/nccl_library.h"

namespace ftx::cuda {

namespace {

[[noreturn]] void throw_nccl_error(ncclResult_t r, const char* call, const char* file, int line) {
  throw Error(std::string(call) + " failed: " + nccl_library().get_error_string(r) + " at " + file + ":" +
              std::to_string(line));
}

#define FTX_NCCL_CHECK(call)                                                        \
  do {                                                                              \
    ncclResult_t ftx_nccl_res_ = (call);                                            \
    if (ftx_nccl_res_ != ncclSuccess) throw_nccl_error(ftx_nccl_res_, #call, __FILE__, __LINE__); \
  } while (0)

// Every rank loads NCCL, and all agree before any of them waits in a collective: one rank without
// the library is an error on every rank instead of a hang in the others' bootstrap.
const NcclLibrary& load_on_every_rank(dist::Communicator& host) {
  std::string error;
  const NcclLibrary* lib = nullptr;
  try {
    lib = &nccl_library();
  } catch (const Error& e) {
    error = e.what();
  }
  if (!host.all_true(lib != nullptr)) {
    if (!error.empty()) throw Error(error);
    throw Error("NCCL could not be loaded on another rank (see that rank's error)");
  }
  return *lib;
}

// NCCL's name for an activation dtype.
ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    default: throw Error(std::string("NCCL: no collective for ") + dtype_name(t) + " data");
  }
}

class NcclCommunicator : public dist::Communicator {
 public:
  NcclCommunicator(std::unique_ptr<dist::Communicator> host, CudaBackend& backend)
      : host_(std::move(host)), backend_(backend), stream_(backend.stream()), nccl_(load_on_every_rank(*host_)) {
    ncclUniqueId id{};
    if (host_->rank() == 0) FTX_NCCL_CHECK(nccl_.get_unique_id(&id));
    host_->broadcast(&id, sizeof(id), 0);
    FTX_CUDA_CHECK(cudaSetDevice(backend.device()));
    FTX_NCCL_CHECK(nccl_.comm_init_rank(&comm_, host_->size(), id, host_->rank()));
  }
  ~NcclCommunicator() override {
    if (comm_) nccl_.comm_destroy(comm_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  void all_reduce_sum(void* data, size_t n, DType dtype) override {
    if (n == 0 || backend_.replaying()) return;  // a replayed step's graph holds the all-reduce
    FTX_NCCL_CHECK(nccl_.all_reduce(data, data, n, nccl_type(dtype), ncclSum, comm_, stream_));
  }
  void all_gather(void* data, size_t n, DType dtype) override {
    if (n == 0 || backend_.replaying()) return;
    // In place: this rank's part already sits at data + rank·n.
    const void* mine = static_cast<const char*>(data) + static_cast<size_t>(rank()) * n * dtype_size(dtype);
    FTX_NCCL_CHECK(nccl_.all_gather(mine, data, n, nccl_type(dtype), comm_, stream_));
  }
  void broadcast(void* data, size_t bytes, int root) override { host_->broadcast(data, bytes, root); }
  void barrier() override { host_->barrier(); }
  bool all_true(bool ok) override { return host_->all_true(ok); }
  // Inter-stage activations (device memory), enqueued on the backend's stream like the all-reduce.
  void send(const void* data, size_t n, DType dtype, int peer) override {
    if (n == 0 || backend_.replaying()) return;
    FTX_NCCL_CHECK(nccl_.send(data, n, nccl_type(dtype), peer, comm_, stream_));
  }
  void recv(void* data, size_t n, DType dtype, int peer) override {
    if (n == 0 || backend_.replaying()) return;
    FTX_NCCL_CHECK(nccl_.recv(data, n, nccl_type(dtype), peer, comm_, stream_));
  }
  void send_host(const void* data, size_t bytes, int peer) override { host_->send_host(data, bytes, peer); }
  void recv_host(void* data, size_t bytes, int peer) override { host_->recv_host(data, bytes, peer); }
  // The host communicator splits; the sub-group makes its own NCCL communicator over it.
  std::unique_ptr<dist::Communicator> split(int color, int key) override {
    return make_nccl_communicator(host_->split(color, key), backend_);
  }

 private:
  std::unique_ptr<dist::Communicator> host_;
  CudaBackend& backend_;
  cudaStream_t stream_;
  const NcclLibrary& nccl_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<dist::Communicator> make_nccl_communicator(std::unique_ptr<dist::Communicator> host,
                                                           ops::Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (!cuda) throw Error("the NCCL communicator needs the CUDA backend, not " + backend.name());
  if (host->size() <= 1) return host;
  return std::make_unique<NcclCommunicator>(std::move(host), *cuda);
}

}  // namespace ftx::cuda

#endif  // FTX_HAVE_NCCL
