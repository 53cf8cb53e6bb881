// config.json's rotary settings as transformers 4.x and 5.x write them (lib/convert/hf_config.h):
// read from every place, refused where places disagree or the type is not one ftx computes; and
// the key tables against man/ftx-convert-hf.1, which prints them.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "formats/error.h"
#include "lib/convert/hf_config.h"

namespace ftx {
namespace {

using json = nlohmann::json;

const hf::RopeKeys kNeox{{"rotary_emb_base"}, {"rotary_pct"}, 10000.0, 0.25};

std::string error_of(const json& j, const hf::RopeKeys& k = kNeox) {
  try {
    hf::read_rope(j, "config.json", k);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfConfig, RopeFromEveryPlace) {
  // transformers 4.45: old and new names side by side.
  auto r = hf::read_rope(json::parse(R"({"rotary_pct": 0.5, "partial_rotary_factor": 0.5, "rotary_emb_base": 5000,
                                          "rope_theta": 5000, "rope_scaling": null})"), "c", kNeox);
  EXPECT_EQ(r.partial_factor, 0.5);
  EXPECT_EQ(r.theta, 5000);
  // transformers 5: rope_parameters only (issue 37's GPT-NeoX).
  r = hf::read_rope(json::parse(R"({"rope_parameters": {"partial_rotary_factor": 0.5, "rope_theta": 5000.0,
                                                        "rope_type": "default"}})"), "c", kNeox);
  EXPECT_EQ(r.partial_factor, 0.5);
  EXPECT_EQ(r.theta, 5000);
  EXPECT_EQ(r.scaling.type, RopeScalingType::kNone);
  // Nothing: the architecture's defaults.
  r = hf::read_rope(json::object(), "c", kNeox);
  EXPECT_EQ(r.partial_factor, 0.25);
  EXPECT_EQ(r.theta, 10000);
}

TEST(HfConfig, RopeScalingOfBothVersions) {
  auto r = hf::read_rope(json::parse(R"({"rope_scaling": {"type": "linear", "factor": 2.0}})"), "c", kNeox);
  EXPECT_EQ(r.scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(r.scaling.factor, 2.0);
  r = hf::read_rope(json::parse(R"({"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_theta": 500000.0}})"), "c", kNeox);
  EXPECT_EQ(r.scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(r.theta, 500000);
}

TEST(HfConfig, RopeRefusalsNameTheKeyAndValue) {
  EXPECT_NE(error_of(json::parse(R"({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}})")).find("'dynamic'"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"rope_scaling": {"type": "yarn", "factor": 2.0}})")).find("rope_scaling.type"),
            std::string::npos);
  // Two places that disagree (transformers 5 takes rotary_pct, 4.45 partial_rotary_factor).
  const std::string e = error_of(json::parse(R"({"rotary_pct": 0.5, "partial_rotary_factor": 0.25})"));
  EXPECT_NE(e.find("partial_rotary_factor = 0.25"), std::string::npos) << e;
  EXPECT_NE(e.find("rotary_pct = 0.5"), std::string::npos) << e;
  EXPECT_NE(error_of(json::parse(R"({"rope_theta": 10000, "rope_parameters": {"rope_theta": 5000}})")).find("disagree"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"rope_parameters": {"rope_type": "default", "mrope_section": [1, 2]}})"))
                .find("rope_parameters.mrope_section"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"rope_parameters": {"rope_type": "llama3", "factor": 8.0}})")).find("low_freq_factor"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"rope_parameters": {"rope_type": "default", "factor": 4.0}})")).find("factor"),
            std::string::npos);
}

TEST(HfConfig, UnknownKeysAreListed) {
  const auto u = hf::unknown_keys(json::parse(R"({"model_type": "llama", "hidden_size": 8, "dtype": "bfloat16",
                                                  "attn_logit_softcapping": 30.0, "use_cache": true})"),
                                  "llama");
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0], "attn_logit_softcapping");
}

// Every key of every architecture's table appears in the man page's section for it, and each key
// it reads with the table's note: what it becomes, which values are refused (D11: llama's list
// carried Qwen2's attention_bias note, which refuses false).
TEST(HfConfig, D11_ManPageSaysWhatTheTablesSay) {
  std::ifstream in(std::string(FTX_TEST_SOURCE_DIR) + "/man/ftx-convert-hf.1");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string raw = ss.str();
  std::string man;
  for (size_t i = 0; i < raw.size(); ++i)  // roff's \- is a plain dash here
    if (!(raw[i] == '\\' && i + 1 < raw.size() && raw[i + 1] == '-')) man += raw[i];
  auto words = [](const std::string& s) {  // runs of white space as one space, none at the ends
    std::string out;
    std::istringstream is(s);
    for (std::string w; is >> w;) out += (out.empty() ? "" : " ") + w;
    return out;
  };
  for (const char* arch : {"gpt2", "gpt_bigcode", "gptj", "gpt_neox", "bloom", "opt", "xglm", "llama", "mistral", "qwen2"}) {
    const size_t at = man.find(std::string(".SS ") + arch + "\n");
    ASSERT_NE(at, std::string::npos) << arch;
    const size_t end = man.find(".SS ", at + 4);
    const std::string section = man.substr(at, end - at);
    for (const hf::KeyRule& r : hf::architecture_keys(arch)) {
      EXPECT_NE(section.find(r.key), std::string::npos) << arch << " key " << r.key;
      if (r.use != hf::KeyUse::kRead) continue;
      const std::string head = std::string("\\fB") + r.key + "\\fR\n";
      const size_t k = section.find(head);
      ASSERT_NE(k, std::string::npos) << arch << ": no entry for " << r.key;
      const size_t from = k + head.size();
      const size_t to = std::min(section.find("\n.TP", from), section.find("\n.PP", from));
      EXPECT_EQ(words(section.substr(from, to - from)), words(r.note)) << arch << " key " << r.key;
    }
  }
}

}  // namespace
}  // namespace ftx
