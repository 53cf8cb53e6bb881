// The one writer: runs TensorJobs on a pool of worker threads, checks every output against the
// file list config.ini implies, writes OUT/<tp>-gpu/ through OutputDir (a temporary folder renamed
// into place only when everything, config.ini and manifest.json included, is written).
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "formats/checksum.h"
#include "formats/error.h"
#include "formats/ft_dir.h"
#include <cstdio>

#include "lib/convert/conversion.h"
#include "lib/convert/written_values.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/util/progress.h"

namespace ftx {

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int64_t endoftext_id(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    auto it = j.find("<|endoftext|>");
    if (it != j.end() && it->is_number_integer()) return it->get<int64_t>();
  } catch (const nlohmann::json::exception&) {
  }
  return -1;
}

void add_gpt2_tokenizer_files(ConversionPlan& plan, const ConvertOptions& opt) {
  if (!opt.vocab_path.empty()) {
    auto mf = MappedFile::open(opt.vocab_path);
    int64_t id = endoftext_id(std::string(reinterpret_cast<const char*>(mf->data()), mf->size()));
    if (id >= 0) plan.cfg.start_id = plan.cfg.end_id = id;
    plan.copy_files.emplace_back("vocab.json", Storage{mf->data(), mf->size(), mf, mf, 0, opt.vocab_path});
  }
  if (!opt.merges_path.empty()) {
    auto mf = MappedFile::open(opt.merges_path);
    plan.copy_files.emplace_back("merges.txt", Storage{mf->data(), mf->size(), mf, mf, 0, opt.merges_path});
  }
}

namespace {

const char* section_of(const ModelConfig& c) {
  return c.ft_variant == FtVariant::kGptJ ? "gptj" : c.ft_variant == FtVariant::kGptNeoX ? "gptneox" : "gpt";
}

}  // namespace

void write_conversion(ConversionPlan& plan, const ConvertOptions& opt) {
  ModelConfig& cfg = plan.cfg;
  cfg.tensor_para_size = opt.tp;
  cfg.weight_data_type = opt.dtype;
  if (opt.moe_ep_size > 1) {
    FTX_CHECK(cfg.is_moe(), plan.source_path,
              "--moe-ep-size " + std::to_string(opt.moe_ep_size) + ": the model has no experts to place on ranks");
    cfg.moe_ep_size = opt.moe_ep_size;
    for (TensorJob& j : plan.jobs) j.whole_experts = j.stack_experts;
  }
  FTX_CHECK(opt.dtype == DType::kFloat32 || opt.dtype == DType::kFloat16 || opt.dtype == DType::kBFloat16,
            "", std::string("unsupported weight data type ") + dtype_name(opt.dtype) + " (use fp32, fp16 or bf16)");

  if (opt.start_id >= 0) cfg.start_id = opt.start_id;
  if (opt.end_id >= 0) cfg.end_id = opt.end_id;
  // The files config.ini implies; every job's output must be one of them with exactly this shape.
  cfg.validate(opt.tp, plan.source_path);
  const std::vector<FtWeightFile> expected = ft_weight_files(cfg, opt.tp);
  std::map<std::string, const FtWeightFile*> by_file;
  std::set<std::string> expected_names, produced_names;
  for (auto& f : expected) {
    by_file[f.file_name()] = &f;
    expected_names.insert(f.name);
  }
  for (auto& j : plan.jobs) {
    FTX_CHECK(expected_names.count(j.name), plan.source_path,
              "tensor '" + j.name + "' (from " + j.source + ") does not belong in a model with this configuration");
    FTX_CHECK(produced_names.insert(j.name).second, plan.source_path, "tensor '" + j.name + "' given twice");
  }
  for (auto& f : expected) {
    if (f.optional || produced_names.count(f.name)) continue;
    const std::vector<std::string> src = plan.source_names ? plan.source_names(f.name) : std::vector<std::string>{};
    std::string what = src.size() == 1 ? "has no tensor '" + src[0] + "'" : "has none of the tensors ";
    for (size_t i = 0; src.size() > 1 && i < src.size(); ++i) what += (i ? ", '" : "'") + src[i] + "'";
    if (src.empty()) what = "no source tensor for '" + f.name + "'";
    throw Error(plan.source_path, what + " (the weights do not match the configuration)");
  }

  OutputDir out(opt.out_dir + "/" + std::to_string(opt.tp) + "-gpu", opt.force);

  uint64_t total_bytes = 0;
  for (auto& j : plan.jobs)
    for (auto& s : j.shards) total_bytes += s.nbytes();
  Progress progress("convert", plan.jobs.size(), total_bytes, opt.quiet);

  struct Written {
    std::string tensor;
    int64_t rank;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    uint32_t crc;
    DType dtype;
  };
  std::map<std::string, Written> manifest;
  std::mutex mu;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;

  auto worker = [&] {
    for (;;) {
      if (failed) return;
      size_t i = next++;
      if (i >= plan.jobs.size()) return;
      const TensorJob& job = plan.jobs[i];
      try {
        uint64_t in_bytes = 0;
        for (auto& s : job.shards) in_bytes += s.nbytes();
        run_tensor_job(job, opt.tp, opt.dtype, [&](const JobOutput& o) {
          FtWeightFile probe{job.name, o.rank, o.shape, false};
          const std::string fname = probe.file_name();
          auto it = by_file.find(fname);
          FTX_CHECK(it != by_file.end(), job.source, "produces unexpected file " + fname);
          FTX_CHECK(it->second->shape == o.shape, job.source,
                    fname + " would have shape " + shape_to_string(o.shape) + " but the configuration implies " +
                        shape_to_string(it->second->shape) + " (config/weights mismatch)");
          // One pass for the checksum and the values (written_values.h): no NaN or Inf is written.
          const WeightScan scan = scan_weight_bytes(o.data, o.nbytes, opt.dtype, true);
          check_written_values(job, opt.dtype, fname, scan);
          write_file(out.file(fname), o.data, o.nbytes);
          const uint32_t crc = scan.crc32;
          std::lock_guard<std::mutex> lock(mu);
          manifest[fname] = Written{job.name, o.rank, o.shape, o.nbytes, crc, opt.dtype};
        });
        // The source pages are not needed again: keep the resident set to the jobs in flight.
        for (auto& s : job.shards) s.release_pages();
        std::lock_guard<std::mutex> lock(mu);
        progress.advance(1, in_bytes);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.exchange(true)) error = std::current_exception();
        return;
      }
    }
  };
  const int n_threads = std::max(1, std::min<int>(opt.processes, static_cast<int>(plan.jobs.size())));
  std::vector<std::thread> pool;
  for (int t = 0; t < n_threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);

  // config.ini: ftx's full set, then the converter-specific FT keys.
  IniFile ini = cfg.to_ini();
  for (auto& kv : plan.extra_ini) ini.set(section_of(cfg), kv.first, kv.second);
  ini.write(out.file("config.ini"));

  for (auto& tf : plan.text_files) write_file(out.file(tf.first), tf.second.data(), tf.second.size());
  for (auto& cf : plan.copy_files) write_file(out.file(cf.first), cf.second.data, cf.second.nbytes);
  for (auto& st : plan.side_tensors) {
    const std::string fname = st.file.file_name();
    FTX_CHECK(!manifest.count(fname), plan.source_path, "side file " + fname + " would replace a weight file");
    FTX_CHECK(st.bytes.size() == static_cast<size_t>(st.file.numel()) * dtype_size(st.dtype), plan.source_path,
              "side file " + fname + " has " + std::to_string(st.bytes.size()) + " bytes for shape " +
                  shape_to_string(st.file.shape));
    write_file(out.file(fname), st.bytes.data(), st.bytes.size());
    manifest[fname] = Written{st.file.name, st.file.rank, st.file.shape, st.bytes.size(),
                              crc32_bytes(st.bytes.data(), st.bytes.size()), st.dtype};
  }

  nlohmann::json files = nlohmann::json::array();
  for (auto& kv : manifest) {
    files.push_back({{"file", kv.first},
                     {"tensor", kv.second.tensor},
                     {"rank", kv.second.rank},
                     {"dtype", dtype_name(kv.second.dtype)},
                     {"shape", kv.second.shape},
                     {"bytes", kv.second.nbytes},
                     {"crc32", kv.second.crc}});
  }
  nlohmann::json m = {{"format", "ftx-ft-manifest-1"},
                      {"source_format", plan.source_format},
                      {"source", plan.source_path},
                      {"tensor_para_size", opt.tp},
                      {"weight_data_type", dtype_name(opt.dtype)},
                      {"files", files}};
  const std::string text = m.dump(1) + "\n";
  write_file(out.file("manifest.json"), text.data(), text.size());
  out.commit();
  progress.finish();
  // After the output exists, so an error is never preceded by warnings about a folder not written.
  for (const std::string& w : plan.warnings) std::fprintf(stderr, "ftx: warning: %s\n", w.c_str());
  for (auto [key, id] : {std::pair<const char*, int64_t>{"start_id", cfg.start_id}, {"end_id", cfg.end_id}})
    if (id < 0 || id >= cfg.vocab_size)
      std::fprintf(stderr,
                   "ftx: warning: %s: config.ini %s = %lld is outside the vocabulary [0, %lld) (FT runs it; an end_id "
                   "there never stops generation); --%s sets another\n",
                   plan.source_path.c_str(), key, static_cast<long long>(id), static_cast<long long>(cfg.vocab_size),
                   std::string(key).replace(std::string(key).find('_'), 1, "-").c_str());
}

}  // namespace ftx
