// ftx rouge: ROUGE-1/2/L/Lsum of given summaries against references (lib/eval/rouge.h), as Google's
// rouge_score computes them; no model. Scores eval-summarize's output (or any JSON lines) again.
// See man/ftx-rouge.1.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cmd/flag_checks.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/output_file.h"
#include "lib/eval/summarize.h"

namespace {

struct RougeFlags {
  std::string data, output = "-", prediction_key = "summary", reference_key = "reference";
  bool force = false;
};

void add_score(nlohmann::ordered_json& j, const char* name, const ftx::RougeScore& s) {
  j[name] = s.fmeasure;
  j[std::string(name) + "_precision"] = s.precision;
  j[std::string(name) + "_recall"] = s.recall;
}

int run_rouge(const RougeFlags& f) {
  if (f.prediction_key.empty() || f.reference_key.empty())
    throw ftx::UsageError("--prediction-key and --reference-key cannot be empty");
  ftx::cmd::check_distinct_files("--data", f.data, "--output", f.output);
  // Each pair read as (prediction, reference).
  const auto pairs = ftx::read_summarize_jsonl(f.data, f.prediction_key, f.reference_key, 0);
  ftx::AtomicOutput out(f.output, f.force);
  ftx::SummarizeTotals totals;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const ftx::RougeScores s = ftx::rouge_scores(pairs[i].reference, pairs[i].article);
    totals.add(s);
    nlohmann::ordered_json j;
    j["index"] = i;
    add_score(j, "rouge1", s.rouge1);
    add_score(j, "rouge2", s.rouge2);
    add_score(j, "rougeL", s.rougeL);
    add_score(j, "rougeLsum", s.rougeLsum);
    out.write(j.dump() + "\n");
  }
  out.commit();
  std::FILE* report = f.output == "-" ? stderr : stdout;
  std::fputs(totals.report().c_str(), report);
  std::fprintf(report, "[INFO] %lld pairs\n", static_cast<long long>(totals.examples));
  return 0;
}

ftx::cmd::Action setup_rouge(CLI::App* sub) {
  auto f = std::make_shared<RougeFlags>();
  sub->add_option("--data", f->data,
                  "JSON lines, a summary and its reference each (eval-summarize's output reads as it is; -: stdin)")
      ->required();
  sub->add_option("--prediction-key", f->prediction_key, "The summary's field (default summary)");
  sub->add_option("--reference-key", f->reference_key, "The reference's field (default reference)");
  sub->add_option("--output", f->output,
                  "Scores, one JSON line per pair: F-measure, precision and recall of each ROUGE (default -: stdout)");
  sub->add_flag("--force", f->force, "Replace an existing output");
  return [f] { return run_rouge(*f); };
}

FTX_SUBCOMMAND("rouge", "ROUGE-1/2/L/Lsum of summaries against references (Google's rouge_score, no stemmer)",
               setup_rouge);

}  // namespace
