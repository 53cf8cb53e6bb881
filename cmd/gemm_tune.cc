// ftx gemm-tune: time the GEMMs a GPT decoder runs and write FT's gemm_config.in.
#include <algorithm>
#include <memory>
#include <string>

#include "cmd/flag_checks.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/ft_dir.h"
#include "lib/gemm/gemm_tune.h"
#include "lib/decoding/decoder.h"
#include "lib/engine/scheduler.h"
#include "lib/model/model_config.h"
#include "lib/model/model_dir.h"

namespace {

struct GemmTuneFlags {
  std::string model_dir;
  int64_t head_num = 0, size_per_head = 0, inter_size = 0, vocab_size = 0, num_layer = 0;
  int64_t batch_size = 0, beam_width = 1, max_input_len = 0, tensor_para_size = 0, int8_mode = 0;
  int repeats = 9;
  std::string data_type, output = ftx::gemm::kGemmConfigFileName;
  bool quiet = false, force = false;
};

ftx::cmd::Action setup(CLI::App* sub) {
  auto f = std::make_shared<GemmTuneFlags>();
  sub->add_option("-m,--model-dir", f->model_dir, "converted model folder (OUT/N-gpu) to read sizes from");
  auto* hn = sub->add_option("--head-num", f->head_num, "attention heads (whole model)");
  auto* sph = sub->add_option("--size-per-head", f->size_per_head, "head dimension");
  auto* is = sub->add_option("--inter-size", f->inter_size, "FFN inner size (whole model)");
  auto* vs = sub->add_option("--vocab-size", f->vocab_size, "vocabulary size");
  auto* nl = sub->add_option("--num-layer", f->num_layer, "layers (accepted for symmetry; shapes do not depend on it)");
  sub->add_option("--batch-size", f->batch_size, "largest batch size; every size 1..B is tuned")->required();
  sub->add_option("--beam-width", f->beam_width, "beam width")->required();
  sub->add_option("--max-input-len", f->max_input_len, "longest prompt, in tokens")->required();
  auto* tp = sub->add_option("--tensor-para-size", f->tensor_para_size,
                             "tensor-parallel size (default: the model folder's, else 1)");
  sub->add_option("--data-type", f->data_type, "fp32, fp16 or bf16")->required();
  sub->add_option("--int8-mode", f->int8_mode, "0, 1 (weight-only) or 2 (SmoothQuant); recorded in the header");
  sub->add_option("--repeats", f->repeats, "timings per candidate; the median is kept (default 9)");
  sub->add_option("-o,--output", f->output, "file to write (default gemm_config.in; -: standard output)");
  sub->add_flag("--force", f->force, "replace an existing output file");
  sub->add_flag("-q,--quiet", f->quiet, "no progress on stderr");
  for (auto* o : {hn, sph, is, vs, nl}) o->excludes("--model-dir");
  (void)tp;

  return [f]() -> int {
    using namespace ftx::gemm;
    using ftx::cmd::check_range;
    // Checked before any GPU work; 0 means "not given" for the sizes and the TP size.
    for (auto [flag, v] : {std::pair<const char*, int64_t>{"--head-num", f->head_num}, {"--size-per-head", f->size_per_head},
                           {"--inter-size", f->inter_size}, {"--vocab-size", f->vocab_size}, {"--num-layer", f->num_layer}})
      check_range(flag, v, 0, ftx::cmd::kMaxFlagCount);
    check_range("--tensor-para-size", f->tensor_para_size, 0, ftx::cmd::kMaxRanks);
    check_range("--batch-size", f->batch_size, 1, ftx::kMaxBatchSize);
    check_range("--beam-width", f->beam_width, 1, ftx::kMaxBeamWidth);
    check_range("--max-input-len", f->max_input_len, 1, ftx::cmd::kMaxFlagCount);
    check_range("--repeats", int64_t{f->repeats}, 1, 10000);
    GemmTuneArgs a;
    if (!f->model_dir.empty()) {
      ftx::ModelConfig cfg = ftx::read_model_config(f->model_dir);
      a.dims = gemm_dims_from_model(cfg, f->tensor_para_size > 0 ? f->tensor_para_size
                                                                 : std::max<int64_t>(1, cfg.tensor_para_size));
    } else {
      if (f->head_num <= 0 || f->size_per_head <= 0 || f->inter_size <= 0 || f->vocab_size <= 0)
        throw ftx::UsageError(
            "give -m MODEL_DIR/N-gpu, or all of --head-num, --size-per-head, --inter-size and --vocab-size");
      a.dims.head_num = f->head_num;
      a.dims.size_per_head = f->size_per_head;
      a.dims.inter_size = f->inter_size;
      a.dims.vocab_size = f->vocab_size;
      a.dims.tensor_para_size = f->tensor_para_size > 0 ? f->tensor_para_size : 1;
    }
    a.workload.batch_size = f->batch_size;
    a.workload.beam_width = f->beam_width;
    a.workload.max_input_len = f->max_input_len;
    a.dtype = gemm_dtype_from_name(f->data_type);
    if (f->int8_mode < 0 || f->int8_mode > 2)
      throw ftx::UsageError("--int8-mode must be 0, 1 or 2, got " + std::to_string(f->int8_mode));
    if (f->repeats < 1) throw ftx::UsageError("--repeats must be at least 1");
    a.int8_mode = f->int8_mode;
    a.output = f->output;
    a.force = f->force;
    a.quiet = f->quiet;
    a.repeats = f->repeats;
    run_gemm_tune(a);
    return 0;
  };
}

}  // namespace

FTX_SUBCOMMAND("gemm-tune", "time the model's GEMMs on this GPU and write FT's gemm_config.in", setup);
