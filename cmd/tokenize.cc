// ftx tokenize: JSON lines of text to token ids and back, with a model's tokenizer.
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <streambuf>

#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/output_file.h"
#include "lib/tokenizer/jsonl_tokenize.h"
#include "lib/tokenizer/tokenizer.h"

namespace {

struct TokenizeOptions {
  std::string tokenizer_dir, input, output;
  bool decode = false, quiet = false, force = false;
};

int run_tokenize(const TokenizeOptions& o) {
  auto tokenizer = ftx::load_tokenizer(o.tokenizer_dir);

  std::ifstream in_file;
  std::istream* in = &std::cin;
  std::string input_name = "<stdin>";
  if (!o.input.empty() && o.input != "-") {
    in_file.open(o.input, std::ios::binary);
    if (!in_file) throw ftx::Error(o.input, "cannot open input");
    in = &in_file;
    input_name = o.input;
  }

  // A regular file appears only when complete; stdout, a pipe or /dev/stdout is written directly.
  ftx::AtomicOutput out_file(o.output.empty() ? "-" : o.output, o.force);
  struct FileBuf : std::streambuf {
    explicit FileBuf(ftx::AtomicOutput& out) : out_(out) {}
    int overflow(int c) override {
      if (c != EOF) {
        const char ch = static_cast<char>(c);
        out_.write(&ch, 1);
      }
      return c;
    }
    std::streamsize xsputn(const char* s, std::streamsize n) override {
      out_.write(s, static_cast<size_t>(n));
      return n;
    }
    int sync() override {
      out_.flush();
      return 0;
    }
    ftx::AtomicOutput& out_;
  } buf(out_file);
  std::ostream out(&buf);
  std::ios::sync_with_stdio(false);

  ftx::JsonlTokenizeStats stats;
  auto direction = o.decode ? ftx::JsonlDirection::kDecode : ftx::JsonlDirection::kEncode;
  stats = ftx::tokenize_jsonl(*tokenizer, direction, *in, input_name, out);
  out.flush();
  out_file.commit();
  if (!o.quiet)
    std::fprintf(stderr, "ftx tokenize: %llu lines, %llu tokens (%s, %s)\n",
                 static_cast<unsigned long long>(stats.lines), static_cast<unsigned long long>(stats.tokens),
                 tokenizer->kind().c_str(), tokenizer->source().c_str());
  return 0;
}

ftx::cmd::Action setup_tokenize(CLI::App* sub) {
  auto o = std::make_shared<TokenizeOptions>();
  sub->add_option("--tokenizer", o->tokenizer_dir,
                  "Model folder or file: vocab.json + merges.txt (GPT-2 BPE), sentencepiece.bpe.model (XGLM), "
                  "tokenizer.json (HF BPE) or tokenizer.model (SentencePiece); see ftx-tokenize(1)")
      ->required();
  sub->add_flag("--decode", o->decode, "Read {\"ids\": [...]} lines and write {\"text\": ...} lines");
  sub->add_option("--input", o->input, "JSON-lines input file (default: standard input)");
  sub->add_option("--output", o->output, "JSON-lines output file (default or -: standard output)");
  sub->add_flag("--force", o->force, "Replace an existing output file");
  sub->add_flag("-q,--quiet", o->quiet, "Do not print the summary line on standard error");
  return [o] { return run_tokenize(*o); };
}

}  // namespace

FTX_SUBCOMMAND("tokenize", "Encode JSON-lines text to token ids, or decode ids to text", setup_tokenize);
