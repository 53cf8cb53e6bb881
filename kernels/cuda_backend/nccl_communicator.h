#pragma once
// NcclCommunicator: tensor-parallel collectives between GPU ranks (one GPU per MPI rank, the GPU
// chosen by the local rank, as make_cuda_backend() does), for use with the CUDA backend.
//
// Pointer contract (the engine calls Communicator::all_reduce_sum on its activation buffers, which
// live in the backend's memory):
//  * all_reduce_sum(data, n, dtype): `data` is DEVICE memory of the CUDA backend given at
//    construction, n elements of the backend's activation dtype (fp32, fp16 or bf16: ncclFloat32,
//    ncclFloat16, ncclBfloat16; a half sum is taken in half, as FasterTransformer's).
//    The sum is enqueued with ncclAllReduce on that backend's stream and the call returns before it
//    completes: later work on the stream (the engine's next op, download()) sees the result, and
//    every rank gets the same bits (NCCL's ring/tree reduce each element once and broadcast it).
//  * broadcast, barrier, all_true: HOST memory, through the host communicator (MPI) this one was
//    built from — the engine broadcasts token ids and flags, not device tensors.
//  * send(data, n, dtype, peer) / recv(data, n, dtype, peer): DEVICE memory, ncclSend/ncclRecv on the backend's
//    stream (pipeline stages pass their hidden states); like the all-reduce they return once
//    enqueued and are skipped while a recorded decode step replays (the graph holds them).
//  * all_gather(data, n, dtype): DEVICE memory, in place (ncclAllGather from data + rank·n into data).
//  * send_host / recv_host: HOST memory, through the host communicator (the last stage's logits to
//    rank 0).
//  * split(color, key): the host communicator splits (MPI_Comm_split) and the sub-group makes its own
//    NCCL communicator over it, as FT makes one per TP row and one per PP column.
// With a host communicator of size 1 there is nothing to reduce; make_nccl_communicator returns the
// host communicator itself.
//
// Bootstrap: rank 0 makes the ncclUniqueId, the host communicator broadcasts it, every rank calls
// ncclCommInitRank on its backend's device. Not run on a GPU when written (no GPU, no second rank).
// Compiled only when CMake found NCCL (FTX_HAVE_NCCL).
#include <memory>

#include "lib/dist/communicator.h"
#include "lib/ops/backend.h"

namespace ftx::cuda {

#ifdef FTX_HAVE_NCCL
// `backend` must be the CUDA backend (make_cuda_backend) and outlive the communicator.
std::unique_ptr<dist::Communicator> make_nccl_communicator(std::unique_ptr<dist::Communicator> host,
                                                           ops::Backend& backend);
#endif

}  // namespace ftx::cuda
