// ftx inspect PATH [--stats] [--json] [--all]: one line per tensor of any supported input.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cmd/subcommand.h"
#include "formats/checkpoint.h"
#include "formats/error.h"
#include "formats/input_file.h"
#include "lib/inspect/listing.h"
#include "lib/inspect/verify.h"

namespace {

struct InspectFlags {
  std::string path;
  bool stats = false, json = false, all = false, verify = false;
};

// --verify: one line per file ("FILE: OK" / "FILE: FAILED (why)"; JSON lines with --json), a
// summary on stderr, exit 1 when any file failed.
int run_verify(const InspectFlags& f) {
  std::error_code ec;
  if (!std::filesystem::exists(f.path, ec)) throw ftx::Error(f.path, "no such file or folder");
  if (!ftx::is_ft_model_dir(f.path))
    throw ftx::Error(f.path, "--verify checks a converted model folder (OUT/N-gpu, with config.ini and manifest.json)");
  const auto t0 = std::chrono::steady_clock::now();
  const ftx::FolderVerification v = ftx::verify_ft_folder(f.path, [&](const ftx::VerifiedFile& file) {
    if (f.json) {
      nlohmann::ordered_json j;
      j["file"] = file.file;
      j["ok"] = file.problem.empty();
      if (!file.problem.empty()) j["problem"] = file.problem;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%s: %s\n", file.file.c_str(), file.problem.empty() ? "OK" : ("FAILED (" + file.problem + ")").c_str());
    }
    std::fflush(stdout);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "ftx inspect --verify: %zu files, %.1f MB read in %.2f s: %s%s\n", v.files.size(),
               static_cast<double>(v.bytes) / 1e6, s,
               v.failed() ? (std::to_string(v.failed()) + " FAILED").c_str() : "all OK",
               v.has_checksums ? "" : v.has_manifest ? " (manifest.json records no checksums: sizes and values checked)"
                                                     : " (no manifest.json: sizes and values checked against config.ini)");
  return v.failed() ? 1 : 0;
}

int run_inspect(const InspectFlags& f) {
  if (f.verify) return run_verify(f);
  // A checkpoint on standard input ("-") is copied to a private temporary file: parsers map files.
  ftx::CheckpointListing listing = ftx::list_any(ftx::spool_input(f.path, "the checkpoint"));
  for (const auto& t : listing.tensors) {
    ftx::TensorStats st;
    if (f.stats) {
      st = ftx::compute_stats(t.tensor);
      t.tensor.release_pages();  // keep the resident set small on large checkpoints
    }
    if (f.json) {
      nlohmann::ordered_json j;
      j["name"] = t.name;
      j["dtype"] = ftx::dtype_name(t.tensor.dtype);
      j["shape"] = t.tensor.shape;
      if (f.stats) {
        j["sum"] = st.sum;
        j["abs_sum"] = st.abs_sum;
        j["min"] = st.min;
        j["max"] = st.max;
      }
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    } else if (f.stats) {
      std::printf("%s\t%s\t%s\tsum=%.17g\tabs_sum=%.17g\tmin=%.17g\tmax=%.17g\n", t.name.c_str(),
                  ftx::dtype_name(t.tensor.dtype), ftx::shape_to_string(t.tensor.shape).c_str(), st.sum,
                  st.abs_sum, st.min, st.max);
    } else {
      std::printf("%s\t%s\t%s\n", t.name.c_str(), ftx::dtype_name(t.tensor.dtype),
                  ftx::shape_to_string(t.tensor.shape).c_str());
    }
  }
  // An FT folder's files against manifest.json: sizes always, checksums and values with --stats
  // (which reads every byte anyway). Mismatches are errors after the listing.
  int64_t failed = 0;
  if (ftx::is_ft_model_dir(f.path)) {
    ftx::verify_ft_folder(
        f.path,
        [&](const ftx::VerifiedFile& file) {
          if (file.problem.empty()) return;
          ++failed;
          std::fprintf(stderr, "ftx: error: %s/%s: %s\n", f.path.c_str(), file.file.c_str(), file.problem.c_str());
        },
        f.stats);
  }
  if (f.all) {
    for (const auto& v : listing.values) {
      if (f.json) {
        nlohmann::ordered_json j;
        j["name"] = v.name;
        j["value"] = v.value->repr(4096);
        std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
      } else {
        std::printf("%s\t%s\n", v.name.c_str(), v.value->repr(400).c_str());
      }
    }
  }
  return failed ? 1 : 0;
}

ftx::cmd::Action setup_inspect(CLI::App* sub) {
  auto f = std::make_shared<InspectFlags>();
  sub->add_option("path", f->path,
                  "checkpoint file, HF folder, .nemo, .safetensors, .npy, .npz, or FT N-gpu/ folder (-: a file on stdin)")
      ->required();
  sub->add_flag("--stats", f->stats, "add sum, sum of absolute values, min and max (float64)");
  sub->add_flag("--json", f->json, "one JSON object per tensor");
  sub->add_flag("--all", f->all, "also list non-tensor values (args, iteration, ...)");
  sub->add_flag("--verify", f->verify,
                "check an FT model folder before deploying it: config.ini, every file's size, CRC-32 "
                "(manifest.json) and finite values; exit 1 when any file fails");
  return [f] { return run_inspect(*f); };
}

}  // namespace

FTX_SUBCOMMAND("inspect", "List the tensors of any checkpoint, with optional statistics", setup_inspect);
