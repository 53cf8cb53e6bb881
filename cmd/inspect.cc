// ftx inspect PATH [--stats] [--json] [--all]: one line per tensor of any supported input.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cmd/subcommand.h"
#include "formats/checkpoint.h"
#include "formats/input_file.h"
#include "lib/inspect/listing.h"

namespace {

struct InspectFlags {
  std::string path;
  bool stats = false, json = false, all = false;
};

int run_inspect(const InspectFlags& f) {
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
  return 0;
}

ftx::cmd::Action setup_inspect(CLI::App* sub) {
  auto f = std::make_shared<InspectFlags>();
  sub->add_option("path", f->path,
                  "checkpoint file, HF folder, .nemo, .safetensors, .npy, or FT N-gpu/ folder (-: a file on stdin)")
      ->required();
  sub->add_flag("--stats", f->stats, "add sum, sum of absolute values, min and max (float64)");
  sub->add_flag("--json", f->json, "one JSON object per tensor");
  sub->add_flag("--all", f->all, "also list non-tensor values (args, iteration, ...)");
  return [f] { return run_inspect(*f); };
}

}  // namespace

FTX_SUBCOMMAND("inspect", "List the tensors of any checkpoint, with optional statistics", setup_inspect);
