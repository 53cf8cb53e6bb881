#pragma once
// Communicator: the collective and point-to-point operations tensor and pipeline parallelism need,
// over the ranks that share one model. SingleRank needs no MPI at all; MpiCommunicator exists when built with FTX_HAVE_MPI and is
// chosen only when the process was started by mpirun, so a plain `ftx generate` never touches MPI.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "formats/dtype.h"

namespace ftx::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: every rank ends with the element-wise sum over ranks (identical bits on every rank).
  // n elements of `dtype` (the backend's activation dtype: fp32, or fp16/bf16 on a GPU, where the
  // sum is taken in that dtype, as FasterTransformer's NCCL all-reduce of half activations does).
  virtual void all_reduce_sum(void* data, size_t n, DType dtype) = 0;
  // In place: rank i's n elements are at data + i·n; every rank ends with all size()·n of them.
  // Backend memory, like all_reduce_sum.
  virtual void all_gather(void* data, size_t n, DType dtype) = 0;
  // In place: every rank ends with root's bytes.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Logical AND over ranks (used so that a failure on one rank stops all of them together).
  virtual bool all_true(bool ok) = 0;

  // Point-to-point, for pipeline stages. send() returns once `data` may be reused; recv() once the
  // data has arrived (in stream order on a GPU). Like all_reduce_sum, send/recv take buffers in the
  // backend's memory (device memory for NCCL); send_host/recv_host take host memory (MPI).
  // A pair of ranks must issue matching calls in the same order.
  virtual void send(const void* data, size_t n, DType dtype, int peer) = 0;
  virtual void recv(void* data, size_t n, DType dtype, int peer) = 0;
  virtual void send_host(const void* data, size_t bytes, int peer) = 0;
  virtual void recv_host(void* data, size_t bytes, int peer) = 0;

  // MPI_Comm_split: the ranks passing the same `color` form one sub-communicator, ordered by `key`.
  // Collective over this communicator.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
};

class SingleRank : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(void*, size_t, DType) override {}
  void all_gather(void*, size_t, DType) override {}
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  bool all_true(bool ok) override { return ok; }
  void send(const void*, size_t, DType, int peer) override { no_peer(peer); }
  void recv(void*, size_t, DType, int peer) override { no_peer(peer); }
  void send_host(const void*, size_t, int peer) override { no_peer(peer); }
  void recv_host(void*, size_t, int peer) override { no_peer(peer); }
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<SingleRank>(); }

 private:
  [[noreturn]] static void no_peer(int peer);
};

// True when this process was started by an MPI launcher (Open MPI, MPICH/Hydra, Slurm PMI).
bool launched_by_mpi();

// MpiCommunicator over MPI_COMM_WORLD when launched_by_mpi() and built with MPI; else SingleRank.
// The first call initialises MPI; MPI is finalised at process exit.
std::unique_ptr<Communicator> make_communicator();

}  // namespace ftx::dist
