#include "lib/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "formats/error.h"
#include "formats/mapped_file.h"

namespace ftx {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path)
    : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  // Read the bytes ourselves so a missing file gets ftx's usual message, then let the library parse.
  auto file = MappedFile::open(model_path);
  std::string_view bytes(reinterpret_cast<const char*>(file->data()), file->size());
  auto status = sp_->LoadFromSerializedProto(bytes);
  if (!status.ok()) throw Error(model_path, "not a SentencePiece model: " + status.ToString());
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view utf8) const {
  std::vector<int> ids;
  auto status = sp_->Encode(utf8, &ids);
  if (!status.ok()) throw Error(path_, "cannot encode text: " + status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

void SentencePieceTokenizer::check_id(int32_t id) const {
  // The library would abort or misbehave on an id outside the model, so it never sees one.
  if (id < 0 || id >= vocab_size())
    throw Error(path_, "token id " + std::to_string(id) + " is not in the vocabulary (" +
                           std::to_string(vocab_size()) + " ids)");
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  for (int32_t id : ids) check_id(id);
  std::string text;
  auto status = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) throw Error(path_, "cannot decode ids: " + status.ToString());
  return text;
}

int32_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::string SentencePieceTokenizer::id_to_token(int32_t id) const {
  check_id(id);
  return sp_->IdToPiece(id);
}

std::optional<int32_t> SentencePieceTokenizer::bos_id() const {
  int id = sp_->bos_id();  // -1 when the model has none
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

std::optional<int32_t> SentencePieceTokenizer::eos_id() const {
  int id = sp_->eos_id();
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

}  // namespace ftx
