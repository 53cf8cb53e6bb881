// ftx smoothquant: flags only; the work is in lib/quant (see man/ftx-smoothquant.1).
#include <memory>

#include "cmd/lambada_data.h"
#include "cmd/flag_checks.h"
#include "cmd/subcommand.h"
#include "formats/dtype.h"
#include "formats/error.h"
#include "formats/pending_outputs.h"
#include "lib/dist/communicator.h"
#include "lib/quant/smoothquant.h"

namespace {

struct Flags {
  ftx::quant::SmoothQuantOptions opt;
  std::string dtype = "fp32";
  double alpha = 0;
};

ftx::cmd::Action setup(CLI::App* sub) {
  auto f = std::make_shared<Flags>();
  auto& o = f->opt;
  sub->add_option("-i,--in-file,--model-dir", o.model_dir, "FT model folder (OUT/N-gpu), any TP size")->required();
  sub->add_option("-o,--out-dir,--saved-dir", o.out_dir, "output folder; files go to OUT/<N>-gpu/")->required();
  sub->add_option("-g,--infer-gpu-num,--tensor-parallelism", o.tp, "inference tensor parallel size of the output")
      ->capture_default_str();
  sub->add_option("-t,--weight-data-type,--storage-type", f->dtype, "fp32, fp16 or bf16: the smoothed weights' type")
      ->capture_default_str();
  auto* alpha = sub->add_option("--alpha,--smoothquant,--sq", f->alpha,
                                "SmoothQuant migration strength α in [0, 1] (0.5 is a good first try)");
  sub->add_flag("--calibrate-kv-cache,--kv", o.calibrate_kv_cache, "write the INT8 KV-cache scale");
  sub->add_flag("--fp8", o.fp8,
                "write TensorRT-LLM's FP8 files too: E4M3 layer weights, their weight and activation scales, the "
                "FP8 KV-cache scales (for generate --fp8 / --fp8-kv-cache)");
  sub->add_option("--calib-data", o.calib_data,
                  "calibration texts, JSON lines {\"text\": ...} or {\"ids\": [...]} (default: the LAMBADA test split shipped with ftx)");
  sub->add_option("--calib-samples", o.calib_samples, "samples to calibrate on (the first ones)")->capture_default_str();
  sub->add_option("--calib-seq-len", o.calib_seq_len, "tokens per sample (longer ones are truncated)")
      ->capture_default_str();
  sub->add_option("--format", o.format, "INT8 file layout: trt-llm (TensorRT-LLM) or ft (FasterTransformer OPT W8A8)")->capture_default_str();
  sub->add_option("--device", o.device, "calibration device: cpu or cuda")->capture_default_str();
  sub->add_option("--threads", o.threads, "CPU threads (0: OMP_NUM_THREADS, else all cores)");
  sub->add_option("--save-act-ranges", o.save_act_ranges, "write the calibrated activation ranges (JSON) here");
  sub->add_option("--act-ranges", o.act_ranges, "use these activation ranges (from --save-act-ranges), no calibration");
  sub->add_flag("--force", o.force, "replace an existing OUT/<N>-gpu/ (and --save-act-ranges file)");
  sub->add_flag("-q,--quiet", o.quiet, "no progress on stderr");
  return [f, alpha] {
    auto& o = f->opt;
    // Calibration runs the unsplit model in one process; ranks would race on the same output.
    if (ftx::dist::launched_by_mpi())
      throw ftx::UsageError("smoothquant runs as one process (it calibrates the unsplit model); run it without mpirun");
    if (alpha->count() > 0) o.alpha = f->alpha;
    try {
      o.dtype = ftx::dtype_from_name(f->dtype);
    } catch (const ftx::Error&) {
      throw ftx::UsageError("--weight-data-type '" + f->dtype + "' is not one of fp32, fp16, bf16");
    }
    if (o.dtype != ftx::DType::kFloat32 && o.dtype != ftx::DType::kFloat16 && o.dtype != ftx::DType::kBFloat16)
      throw ftx::UsageError("--weight-data-type '" + f->dtype + "' is not one of fp32, fp16, bf16");
    if (o.out_dir == "-") throw ftx::UsageError("-o: the output is a folder (OUT/<N>-gpu/), it cannot be standard output");
    ftx::cmd::check_range("--threads", o.threads, 0, ftx::cmd::kMaxThreads);
    ftx::cmd::check_range("-g", o.tp, 1, ftx::cmd::kMaxRanks);
    ftx::cmd::check_range("--calib-samples", o.calib_samples, 1, ftx::cmd::kMaxFlagCount);
    ftx::cmd::check_range("--calib-seq-len", o.calib_seq_len, 1, ftx::cmd::kMaxFlagCount);
    ftx::cmd::check_distinct_files("--calib-data", o.calib_data, "--save-act-ranges", o.save_act_ranges);
    ftx::cmd::check_distinct_files("--act-ranges", o.act_ranges, "--save-act-ranges", o.save_act_ranges);
    if (o.calib_data.empty() && o.act_ranges.empty()) o.calib_data = ftx::cmd::default_lambada_path();
    // Calibration takes a while before anything is written: a signal then still names the output.
    struct Pending {
      int handle;
      ~Pending() { ftx::unregister_pending_output(handle); }
    } pending{ftx::register_pending_output("", o.out_dir + "/" + std::to_string(o.tp) + "-gpu")};
    ftx::quant::run_smoothquant(o);
    return 0;
  };
}

}  // namespace

FTX_SUBCOMMAND("smoothquant", "Calibrate and SmoothQuant an FT model folder: smoothed weights plus TensorRT-LLM's INT8 (and with --fp8 FP8) weight, scale and KV-cache files", setup);
