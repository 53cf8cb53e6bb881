// Communicator factory and the MPI implementation (compiled only with FTX_HAVE_MPI).
#include "lib/dist/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "formats/error.h"

#ifdef FTX_HAVE_MPI
#include <mpi.h>
#endif

namespace ftx::dist {

void SingleRank::no_peer(int peer) {
  throw Error("a single rank has no peer rank " + std::to_string(peer) + " to send to or receive from");
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

#ifdef FTX_HAVE_MPI
namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(std::string("MPI: ") + call + ": " + std::string(msg, static_cast<size_t>(len)));
}
#define FTX_MPI(call) check((call), #call)

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// MPI counts are int: large transfers go in chunks of this many elements.
constexpr size_t kChunk = size_t(1) << 30;

class MpiCommunicator : public Communicator {
 public:
  // Over MPI_COMM_WORLD (initialising MPI on first use).
  MpiCommunicator() : MpiCommunicator(world(), false) {}
  // Over `comm`; owned (freed at destruction) when `owned`.
  MpiCommunicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    FTX_MPI(MPI_Comm_rank(comm_, &rank_));
    FTX_MPI(MPI_Comm_size(comm_, &size_));
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(void* data, size_t n, DType dtype) override {
    // The CPU backend's activations are fp32; MPI has no half-precision sum.
    if (dtype != DType::kFloat32)
      throw Error(std::string("MPI all-reduce of ") + dtype_name(dtype) + " activations: only fp32 is summed on the host");
    // MPI counts are int: reduce in chunks.
    float* f = static_cast<float*>(data);
    for (size_t off = 0; off < n; off += kChunk) {
      const int cnt = static_cast<int>(std::min(kChunk, n - off));
      FTX_MPI(MPI_Allreduce(MPI_IN_PLACE, f + off, cnt, MPI_FLOAT, MPI_SUM, comm_));
    }
  }
  void all_gather(void* data, size_t n, DType dtype) override {
    const size_t bytes = n * dtype_size(dtype);
    if (bytes > kChunk) throw Error("MPI all-gather of " + std::to_string(bytes) + " bytes per rank is too large");
    FTX_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, static_cast<int>(bytes), MPI_BYTE, comm_));
  }
  void broadcast(void* data, size_t bytes, int root) override {
    FTX_MPI(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_));
  }
  void barrier() override { FTX_MPI(MPI_Barrier(comm_)); }
  bool all_true(bool ok) override {
    int v = ok ? 1 : 0, r = 0;
    FTX_MPI(MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_MIN, comm_));
    return r != 0;
  }
  // The CPU backend's memory is host memory: both kinds of send are the same MPI call.
  void send(const void* data, size_t n, DType dtype, int peer) override { send_host(data, n * dtype_size(dtype), peer); }
  void recv(void* data, size_t n, DType dtype, int peer) override { recv_host(data, n * dtype_size(dtype), peer); }
  void send_host(const void* data, size_t bytes, int peer) override {
    const char* p = static_cast<const char*>(data);
    for (size_t off = 0; off < bytes || off == 0; off += kChunk) {
      FTX_MPI(MPI_Send(p + off, static_cast<int>(std::min(kChunk, bytes - off)), MPI_BYTE, peer, kTag, comm_));
      if (bytes == 0) break;
    }
  }
  void recv_host(void* data, size_t bytes, int peer) override {
    char* p = static_cast<char*>(data);
    for (size_t off = 0; off < bytes || off == 0; off += kChunk) {
      FTX_MPI(MPI_Recv(p + off, static_cast<int>(std::min(kChunk, bytes - off)), MPI_BYTE, peer, kTag, comm_,
                       MPI_STATUS_IGNORE));
      if (bytes == 0) break;
    }
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    FTX_MPI(MPI_Comm_split(comm_, color, key, &sub));
    return std::make_unique<MpiCommunicator>(sub, true);
  }

 private:
  static constexpr int kTag = 17;
  static MPI_Comm world() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      FTX_MPI(MPI_Init(nullptr, nullptr));
      std::atexit(finalize_at_exit);
    }
    return MPI_COMM_WORLD;
  }
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
};

}  // namespace
#endif

std::unique_ptr<Communicator> make_communicator() {
#ifdef FTX_HAVE_MPI
  if (launched_by_mpi()) return std::make_unique<MpiCommunicator>();
#endif
  return std::make_unique<SingleRank>();
}

}  // namespace ftx::dist
