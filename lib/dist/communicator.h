#pragma once
// Communicator: the collective operations tensor parallelism needs, over the ranks that share one
// model. SingleRank needs no MPI at all; MpiCommunicator exists when built with FTX_HAVE_MPI and is
// chosen only when the process was started by mpirun, so a plain `ftx generate` never touches MPI.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace ftx::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: every rank ends with the element-wise sum over ranks (identical bits on every rank).
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  // In place: every rank ends with root's bytes.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Logical AND over ranks (used so that a failure on one rank stops all of them together).
  virtual bool all_true(bool ok) = 0;
};

class SingleRank : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(float*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  bool all_true(bool ok) override { return ok; }
};

// True when this process was started by an MPI launcher (Open MPI, MPICH/Hydra, Slurm PMI).
bool launched_by_mpi();

// MpiCommunicator over MPI_COMM_WORLD when launched_by_mpi() and built with MPI; else SingleRank.
// The first call initialises MPI; MPI is finalised at process exit.
std::unique_ptr<Communicator> make_communicator();

}  // namespace ftx::dist
