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

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      FTX_MPI(MPI_Init(nullptr, nullptr));
      std::atexit(finalize_at_exit);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    FTX_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    FTX_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(float* data, size_t n) override {
    // MPI counts are int: reduce in chunks.
    const size_t chunk = size_t(1) << 30;
    for (size_t off = 0; off < n; off += chunk) {
      const int cnt = static_cast<int>(std::min(chunk, n - off));
      FTX_MPI(MPI_Allreduce(MPI_IN_PLACE, data + off, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    }
  }
  void broadcast(void* data, size_t bytes, int root) override {
    FTX_MPI(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD));
  }
  void barrier() override { FTX_MPI(MPI_Barrier(MPI_COMM_WORLD)); }
  bool all_true(bool ok) override {
    int v = ok ? 1 : 0, r = 0;
    FTX_MPI(MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    return r != 0;
  }

 private:
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
