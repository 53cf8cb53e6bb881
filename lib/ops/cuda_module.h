#pragma once
// The ftx binary reaches its CUDA pieces (the "cuda" backend, its NCCL communicator, the GEMM tuner)
// through a module of their own, libftx_cuda.so beside it (or in ../lib/ftx/ when installed), which
// registers them when it is loaded. ftx loads it the first time one of them is asked for, so a
// command that never touches a GPU does not pay for loading cuBLASLt: an empty program linked against
// libcublasLt takes 0.05 s and 211 MB of resident memory to start on the machines this was measured
// on, and ftx's CPU commands (convert, tokenize, inspect, CPU decoding) used to pay both every time.
// Test and benchmark programs link the CUDA pieces in directly; for them there is nothing to load.
#include <string>

namespace ftx::ops {

// Loads the CUDA module if there is one and it is not loaded yet (once per process; thread-safe).
// Returns false when there is none (ftx was built without CUDA); throws Error naming the module when
// it is there but cannot be loaded (a CUDA library missing, say).
bool load_cuda_module();

}  // namespace ftx::ops
