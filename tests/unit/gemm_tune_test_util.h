#pragma once
// Shared by the gemm-tune command tests: the device count, running `ftx` with stderr captured,
// a scratch folder, and the tiny workload both tests tune.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "lib/gemm/gemm_config_file.h"
#include "lib/gemm/gemm_shapes.h"

#ifdef FTX_HAVE_CUDA
#include "kernels/gemm_tune/gemm_tuner.h"
#endif



namespace {

int device_count() {
#ifdef FTX_HAVE_CUDA
  return ftx::cuda::cuda_device_count();
#else
  return 0;
#endif
}

struct FtxRun {
  int rc = -1;
  std::string err;
};

// Runs `ftx <args>` with stderr captured.
FtxRun run_ftx(const std::string& args, const std::string& dir) {
  const char* bin = std::getenv("FTX_BIN");
  FtxRun r;
  if (!bin) return r;
  std::string err_path = dir + "/stderr.txt";
  int status = std::system((std::string("'") + bin + "' " + args + " 2>'" + err_path + "'").c_str());
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  return r;
}

std::string temp_dir() {
  char tmpl[] = "/tmp/ftx_gemm_tune_XXXXXX";
  return mkdtemp(tmpl);
}

const char* kTinyArgs =
    "gemm-tune --head-num 4 --size-per-head 32 --inter-size 512 --vocab-size 1000 --num-layer 2 "
    "--batch-size 2 --beam-width 1 --max-input-len 8 --repeats 3";

}  // namespace
