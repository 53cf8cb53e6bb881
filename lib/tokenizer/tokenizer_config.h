#pragma once
// What HuggingFace transformers reads beside a model's tokenizer files, in tokenizer_config.json
// and special_tokens_map.json: the special tokens, the added tokens with their ids, LlamaTokenizer's
// `legacy` and `add_prefix_space`, and whether the folder has a chat template.
#include <optional>
#include <string>
#include <vector>

#include "lib/tokenizer/added_tokens.h"

namespace ftx {

struct TokenizerConfig {
  // Either file is there (a HuggingFace tokenizer folder).
  bool present = false;
  // Bare booleans only; absent (or null, as transformers then takes its default) otherwise.
  // A tokenizer_class of Gemma's (GemmaTokenizer, GemmaTokenizerFast) reads as legacy true and no
  // add_prefix_space, as GemmaTokenizer ignores both.
  std::optional<bool> legacy, add_prefix_space;
  // tokenizer_config.json's added_tokens_decoder ({"ID": {"content": ..., "lstrip": ..., ...}}).
  std::vector<AddedToken> added_tokens;
  // The special tokens named by bos_token, eos_token, unk_token, pad_token, sep_token, cls_token,
  // mask_token and additional_special_tokens ("<s>" or {"content": "<s>", "lstrip": ...}), with
  // no ids; tokenizer_config.json's first, then special_tokens_map.json's.
  std::vector<AddedToken> special_tokens;
  // The content named by bos_token / eos_token / unk_token ("" when none); tokenizer_config.json
  // before special_tokens_map.json.
  std::string bos_token, eos_token, unk_token;
};

// Reads `folder`/tokenizer_config.json and `folder`/special_tokens_map.json; a missing file or
// one that is not a JSON object adds nothing. Throws ftx::Error naming the file for invalid JSON
// or a malformed added_tokens_decoder entry.
TokenizerConfig read_tokenizer_config(const std::string& folder);

// Where `folder` keeps a chat template, as transformers finds one: "<folder>/tokenizer_config.json"
// when it has a non-null "chat_template", else chat_template.jinja or chat_template.json when
// present; "" when none. ftx applies none of them (see ftx-chat(1)).
std::string find_chat_template(const std::string& folder);

}  // namespace ftx
