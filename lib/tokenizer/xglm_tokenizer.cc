#include "lib/tokenizer/xglm_tokenizer.h"

#include "formats/error.h"

namespace ftx {

XglmTokenizer::XglmTokenizer(const std::string& model_path) : spm_(model_path, /*transformers_tokens=*/false) {}

std::vector<int32_t> XglmTokenizer::encode(std::string_view utf8) const {
  std::vector<int32_t> ids = spm_.encode(utf8);
  for (int32_t& id : ids) id = id == 0 ? kUnk : id + kFairseqOffset;  // HF: "spm_id + offset if spm_id else unk"
  return ids;
}

void XglmTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw Error(source(), "token id " + std::to_string(id) + " is not in the vocabulary (" +
                              std::to_string(vocab_size()) + " ids)");
}

std::string XglmTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> spm_ids;
  spm_ids.reserve(ids.size());
  const int32_t first_made_up = spm_.vocab_size() + kFairseqOffset;
  for (int32_t id : ids) {
    check_id(id);
    if (id == kUnk) spm_ids.push_back(0);
    else if (id > kUnk && id < first_made_up) spm_ids.push_back(id - kFairseqOffset);
    // <s>, <pad>, </s> and the made-up words have no text.
  }
  return spm_.decode(spm_ids);
}

std::string XglmTokenizer::id_to_token(int32_t id) const {
  check_id(id);
  static const char* const kSpecial[] = {"<s>", "<pad>", "</s>", "<unk>"};
  if (id <= kUnk) return kSpecial[id];
  const int32_t first_made_up = spm_.vocab_size() + kFairseqOffset;
  if (id >= first_made_up) return "<madeupword" + std::to_string(id - first_made_up) + ">";
  return spm_.id_to_token(id - kFairseqOffset);
}

}  // namespace ftx
