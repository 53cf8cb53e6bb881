#include "lib/convert/megatron_files.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <regex>

#include "formats/dcp_checkpoint.h"
#include "formats/error.h"
#include "formats/mapped_file.h"
#include "lib/convert/conversion.h"
#include "lib/convert/shard_groups.h"

namespace ftx {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

}  // namespace

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<MegatronShardFile> find_megatron_shards(const std::string& dir) {
  // A third number is Megatron Core's expert-parallel rank (mcore_source.cc reads those by the args).
  static const std::regex mp(R"(mp_rank_(\d{2})(?:_(\d{3}))?(?:_\d{3})?)");
  static const std::regex tpp(R"(tp_rank_(\d{2})_pp_rank_(\d{3}))");
  std::vector<MegatronShardFile> out;
  for (auto& n : list_dir(dir)) {
    std::smatch m;
    int64_t tp, pp = 0;
    if (std::regex_match(n, m, mp)) {
      tp = std::stoll(m[1]);
      if (m[2].matched) pp = std::stoll(m[2]);
    } else if (std::regex_match(n, m, tpp)) {
      tp = std::stoll(m[1]);
      pp = std::stoll(m[2]);
    } else {
      continue;
    }
    for (const char* f : {"model_optim_rng.pt", "model_rng.pt"}) {
      std::string p = dir + "/" + n + "/" + f;
      if (path_exists(p)) {
        out.push_back({tp, pp, n, p});
        break;
      }
    }
  }
  return out;
}

std::string resolve_megatron_iteration_dir(const std::string& in) {
  FTX_CHECK(is_directory(in), in, "not a folder (expected a Megatron checkpoint folder)");
  const std::string tracker = in + "/latest_checkpointed_iteration.txt";
  if (path_exists(tracker)) {
    std::string it = trim(read_text_file(tracker));
    if (it == "release") return in + "/release";
    char buf[32];
    try {
      std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(std::stoll(it)));
    } catch (const std::exception&) {
      throw Error(tracker, "expected an iteration number or 'release', found '" + it + "'");
    }
    std::string dir = in + "/" + buf;
    FTX_CHECK(is_directory(dir), tracker, "names iteration '" + it + "' but " + dir + " does not exist");
    return dir;
  }
  if (!find_megatron_shards(in).empty() || is_dcp_dir(in)) return in;
  std::vector<std::string> iters;
  for (auto& n : list_dir(in))
    if ((n == "release" || n.rfind("iter_", 0) == 0) && is_directory(in + "/" + n)) iters.push_back(n);
  FTX_CHECK(!iters.empty(), in, "no mp_rank_XX, tp_rank_XX_pp_rank_XXX, release/ or iter_XXXXXXX/ folders found");
  FTX_CHECK(iters.size() == 1, in, "holds several iterations and no latest_checkpointed_iteration.txt; pass one of them");
  return in + "/" + iters[0];
}

std::string megatron_shard_name(int64_t tp, int64_t pp, int64_t pp_size) {
  char name[64];
  if (pp_size == 1) std::snprintf(name, sizeof name, "mp_rank_%02lld", static_cast<long long>(tp));
  else std::snprintf(name, sizeof name, "mp_rank_%02lld_%03lld", static_cast<long long>(tp), static_cast<long long>(pp));
  return name;
}

ValuePtr megatron_arg(const ValuePtr& args, const char* key) { return args ? args->get(key) : nullptr; }

int64_t megatron_arg_int(const ValuePtr& args, const char* key, int64_t def) {
  auto v = megatron_arg(args, key);
  return (v && v->kind == Value::Kind::kInt) ? v->i : def;
}

bool megatron_arg_bool(const ValuePtr& args, const char* key, bool def) {
  auto v = megatron_arg(args, key);
  return (v && v->kind == Value::Kind::kBool) ? v->b : def;
}

double megatron_arg_double(const ValuePtr& args, const char* key, double def) {
  auto v = megatron_arg(args, key);
  if (v && v->kind == Value::Kind::kFloat) return v->f;
  if (v && v->kind == Value::Kind::kInt) return static_cast<double>(v->i);
  return def;
}

std::string megatron_arg_str(const ValuePtr& args, const char* key, const std::string& def) {
  auto v = megatron_arg(args, key);
  return (v && v->kind == Value::Kind::kString) ? v->str : def;
}

void add_megatron_side_files(ConversionPlan& plan, const ConvertOptions& opt, const ValuePtr& args) {
  ModelConfig& c = plan.cfg;
  c.start_id = c.end_id = 50256;
  add_gpt2_tokenizer_files(plan, opt);
  plan.extra_ini.emplace_back("has_adapters", "False");
  plan.extra_ini.emplace_back("adapter_inter_size", std::to_string(megatron_arg_int(args, "project_size", 0)));
  if (args) {
    std::string text;
    for (auto& kv : args->dict) text += kv.first->key_text() + ":" + python_str(kv.second) + "\n";
    plan.text_files.emplace_back("args.txt", text);
  }
}

}  // namespace ftx
