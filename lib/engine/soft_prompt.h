#pragma once
// FasterTransformer's per-request prompt fields (its Triton names): request_prompt_type 1 (a soft
// prompt) with request_prompt_embedding, rows of the model's hidden size embedded ahead of the
// request's ids, and request_prompt_lengths, how many of them it uses (FT pads a batch's
// embeddings to its longest; the rest are padding).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "lib/engine/requests.h"

namespace ftx {

// The request's soft prompt (rows 0: it gives none, or request_prompt_type 0 without rows).
// request_prompt_embedding is a list of `hidden`-wide rows of numbers or the path of a .npy file
// (float32 or float16, [rows, hidden] or FT's [1, rows, hidden]). Error naming `where` and the
// field for: rows of another width (both shapes given), type 1 without rows or rows without type
// 1, type 2 (prefix prompts: FT does not take them with a request either) and type 3 (p-tuning
// rows with a request: ftx takes them from the model's tables, named by "task"), a length outside
// [1, rows], a value that is not a finite number.
SoftPrompt read_soft_prompt(const nlohmann::json& request, int64_t hidden, const std::string& where);

// Prepends the soft prompt's ids (first_id .. first_id + rows - 1, taken from *next_id) to the
// request's ids. Error naming `where` for a session round (FT's interactive generation refuses
// soft prompts) and for return_context_log_probs (rows have no token to score).
void attach_soft_prompt(Request& r, SoftPrompt soft, int64_t* next_id, const std::string& where);

}  // namespace ftx
