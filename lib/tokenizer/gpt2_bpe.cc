#include "lib/tokenizer/gpt2_bpe.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/tokenizer/gpt2_pretokenizer.h"
#include "lib/tokenizer/tokenizer_files.h"

namespace ftx {

Gpt2BpeTokenizer::Gpt2BpeTokenizer(const std::string& vocab_json_path, const std::string& merges_txt_path)
    : vocab_path_(vocab_json_path), merges_path_(merges_txt_path) {
  bpe_ = std::make_unique<ByteLevelBpe>(read_tokenizer_json(vocab_path_), vocab_path_, /*require_all_bytes=*/true);
  end_of_text_ = bpe_->find("<|endoftext|>");
  load_merges();
}

std::string Gpt2BpeTokenizer::folder() const { return std::filesystem::path(vocab_path_).parent_path().string(); }

void Gpt2BpeTokenizer::load_merges() {
  const std::string text = read_tokenizer_file(merges_path_);
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // no alphabet character is CR
    if (line.empty()) continue;
    if (line_no == 1 && line.substr(0, 8) == "#version") continue;
    size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      throw Error(merges_path_, "line " + std::to_string(line_no) + ": expected two tokens separated by one space, found " +
                                    quote_for_message(std::string(line)));
    std::string left(line.substr(0, space)), right(line.substr(space + 1));
    if (!bpe_->add_merge(left, right))
      throw Error(merges_path_, "line " + std::to_string(line_no) + ": merge " + quote_for_message(std::string(line)) + " makes " +
                                    quote_for_message(left + right) + ", which is not in " + vocab_path_);
  }
}

std::vector<int32_t> Gpt2BpeTokenizer::encode(std::string_view utf8) const {
  std::vector<int32_t> out;
  out.reserve(utf8.size() / 3 + 4);  // English runs at about 4 bytes per token
  std::vector<std::string_view> pieces;
  Gpt2PreTokenizer::split(utf8, &pieces);
  for (std::string_view piece : pieces) bpe_->append_piece(piece, &out);
  return out;
}

}  // namespace ftx
