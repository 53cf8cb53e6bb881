#include "lib/eval/summarize.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/input_file.h"
#include "lib/eval/lambada.h"

namespace ftx {

std::vector<SummarizeExample> read_summarize_jsonl(const std::string& path, const std::string& input_key,
                                                   const std::string& output_key, int64_t max_examples) {
  LineReader in(path);
  const std::string name = in.name();
  std::vector<SummarizeExample> examples;
  std::string line;
  while ((max_examples <= 0 || static_cast<int64_t>(examples.size()) < max_examples) && in.next(line)) {
    const std::string where = "line " + std::to_string(in.line_number());
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(name, where + ": malformed JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw Error(name, where + ": expected a JSON object");
    auto field = [&](const std::string& key) {
      const auto it = j.find(key);
      if (it == j.end())
        throw Error(name, where + ": no \"" + key + "\" field");
      if (!it->is_string()) throw Error(name, where + ": \"" + key + "\" is " + it->type_name() + ", not a string");
      return it->get<std::string>();
    };
    SummarizeExample ex{field(input_key), field(output_key)};
    examples.push_back(std::move(ex));
  }
  if (examples.empty()) throw Error(name, "no examples (empty file)");
  return examples;
}

std::string summarize_prompt(const std::string& article) {
  std::string text = python_strip(article + " TL;DR: ");
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 4, " n't") == 0) {
      out += "n't";
      i += 4;
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::vector<int32_t> summarize_prompt_ids(const std::string& article, const Tokenizer& tok, int64_t max_input_length) {
  std::vector<int32_t> ids = tok.encode(summarize_prompt(article));
  if (max_input_length > 0 && static_cast<int64_t>(ids.size()) > max_input_length)
    ids.resize(static_cast<size_t>(max_input_length));
  return ids;
}

std::string summarize_result_json(const SummarizeResult& r) {
  nlohmann::ordered_json j;
  j["index"] = r.index;
  j["summary"] = r.summary;
  j["reference"] = r.reference;
  j["rouge1"] = r.rouge.rouge1.fmeasure;
  j["rouge2"] = r.rouge.rouge2.fmeasure;
  j["rougeL"] = r.rouge.rougeL.fmeasure;
  j["rougeLsum"] = r.rouge.rougeLsum.fmeasure;
  if (!r.error.empty()) j["error"] = r.error;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

SummarizeResult summarize_result_from_json(const std::string& line, const std::string& where) {
  SummarizeResult r;
  try {
    const auto j = nlohmann::json::parse(line);
    r.index = j.at("index").get<int64_t>();
    r.summary = j.at("summary").get<std::string>();
    r.reference = j.at("reference").get<std::string>();
    r.rouge.rouge1.fmeasure = j.at("rouge1").get<double>();
    r.rouge.rouge2.fmeasure = j.at("rouge2").get<double>();
    r.rouge.rougeL.fmeasure = j.at("rougeL").get<double>();
    r.rouge.rougeLsum.fmeasure = j.at("rougeLsum").get<double>();
    if (j.contains("error")) r.error = j.at("error").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(where, std::string("not an eval-summarize result (") + e.what() + "); --force starts over");
  }
  return r;
}

namespace {

// A double as Python's repr prints it (shortest round trip, "21.5", "0.0"), as summarize.py logs.
std::string python_float(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string SummarizeTotals::report() const {
  std::string s;
  for (const auto& [name, sum] : {std::pair<const char*, double>{"rouge1", rouge1}, {"rouge2", rouge2},
                                  {"rougeL", rougeL}, {"rougeLsum", rougeLsum}})
    s += std::string("[INFO] ") + name + ": " + python_float(mean_percent(sum)) + "\n";
  return s;
}

bool SummarizeTotals::passes(double rouge1_threshold) const { return mean_percent(rouge1) > rouge1_threshold; }

std::string SummarizeTotals::threshold_failure(double rouge1_threshold) const {
  return "rouge1 " + python_float(mean_percent(rouge1)) + " is not above --rouge1-threshold " +
         python_float(rouge1_threshold);
}

void SummarizeTotals::add(const RougeScores& s) {
  ++examples;
  rouge1 += s.rouge1.fmeasure;
  rouge2 += s.rouge2.fmeasure;
  rougeL += s.rougeL.fmeasure;
  rougeLsum += s.rougeLsum.fmeasure;
}

}  // namespace ftx
