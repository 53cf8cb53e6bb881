#include "lib/engine/soft_prompt.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include <nlohmann/json.hpp>

#include "formats/dtype.h"
#include "formats/error.h"
#include "formats/npy.h"

namespace ftx {

namespace {

constexpr const char* kType = "request_prompt_type";
constexpr const char* kEmbedding = "request_prompt_embedding";
constexpr const char* kLengths = "request_prompt_lengths";

std::string shape_text(int64_t rows, int64_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

// One request's int: FT's tensors are [batch], so a one-element list is taken too.
int64_t one_int(const nlohmann::json& v, const char* key, const std::string& where) {
  const nlohmann::json& x = v.is_array() && v.size() == 1 ? v[0] : v;
  if (!x.is_number_integer()) throw Error(where + ": \"" + key + "\" must be an integer, not " + v.dump());
  return x.get<int64_t>();
}

std::vector<float> rows_from_npy(const std::string& path, int64_t hidden, int64_t* rows, const std::string& where) {
  TensorView t;
  try {
    t = read_npy(path);
  } catch (const Error& e) {
    throw Error(where + ": \"" + kEmbedding + "\": " + e.what());
  }
  std::vector<int64_t> shape = t.shape;
  if (shape.size() == 3 && shape[0] == 1) shape.erase(shape.begin());
  if (t.dtype != DType::kFloat32 && t.dtype != DType::kFloat16)
    throw Error(where + ": \"" + kEmbedding + "\" " + path + ": dtype " + dtype_name(t.dtype) +
                " is not float32 or float16");
  if (shape.size() != 2 || shape[1] != hidden)
    throw Error(where + ": \"" + kEmbedding + "\" " + path + ": shape " + shape_to_string(t.shape) +
                " is not [rows, " + std::to_string(hidden) + "] (the model's hidden size)");
  *rows = shape[0];
  std::vector<float> out;
  out.reserve(static_cast<size_t>(shape[0] * hidden));
  t.for_each_element([&](const uint8_t* p) { out.push_back(static_cast<float>(load_as_double(t.dtype, p))); });
  return out;
}

std::vector<float> rows_from_json(const nlohmann::json& v, int64_t hidden, int64_t* rows, const std::string& where) {
  std::vector<float> out;
  *rows = static_cast<int64_t>(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const nlohmann::json& row = v[i];
    if (!row.is_array())
      throw Error(where + ": \"" + kEmbedding + "\" row " + std::to_string(i) + " must be a list of numbers, not " +
                  row.dump());
    if (static_cast<int64_t>(row.size()) != hidden)
      throw Error(where + ": \"" + kEmbedding + "\" row " + std::to_string(i) + " has " + std::to_string(row.size()) +
                  " numbers: rows must be the model's hidden size " + std::to_string(hidden));
    for (const auto& x : row) {
      if (!x.is_number())
        throw Error(where + ": \"" + kEmbedding + "\" row " + std::to_string(i) + ": " + x.dump() + " is not a number");
      out.push_back(x.get<float>());
    }
  }
  return out;
}

}  // namespace

SoftPrompt read_soft_prompt(const nlohmann::json& j, int64_t hidden, const std::string& where) {
  SoftPrompt s;
  const bool has_type = j.contains(kType), has_rows = j.contains(kEmbedding), has_len = j.contains(kLengths);
  if (!has_type && !has_rows && !has_len) return s;
  const int64_t type = has_type ? one_int(j[kType], kType, where) : -1;
  if (type == 2)
    throw Error(where + ": \"" + kType + "\" 2 (a prefix prompt given with the request) is not supported, as in "
                "FasterTransformer; a model folder's prefix prompts are named by \"task\"");
  if (type == 3)
    throw Error(where + ": \"" + kType + "\" 3 (p-tuning rows given with the request) is not supported; p-tuning "
                "rows come from the model's prompt tables, named by \"task\" (type 1 prepends rows of your own)");
  if (has_type && type != 0 && type != 1)
    throw Error(where + ": \"" + kType + "\" " + std::to_string(type) +
                " is not 0 (none), 1 (soft prompt), 2 (prefix prompt) or 3 (p-tuning)");
  if (type == 0) {
    if (has_rows || has_len)
      throw Error(where + ": \"" + (has_rows ? kEmbedding : kLengths) + "\" given with \"" + kType +
                  "\" 0 (no prompt); a soft prompt is type 1");
    return s;
  }
  if (!has_type)
    throw Error(where + ": \"" + (has_rows ? kEmbedding : kLengths) + "\" needs \"" + kType + "\": 1 (a soft prompt)");
  if (!has_rows) throw Error(where + ": \"" + kType + "\" 1 (a soft prompt) needs \"" + kEmbedding + "\"");
  if (hidden <= 0) throw Error(where + ": soft prompts are not read here (no model hidden size)");
  const nlohmann::json& e = j[kEmbedding];
  if (e.is_string()) s.values = rows_from_npy(e.get<std::string>(), hidden, &s.rows, where);
  else if (e.is_array()) s.values = rows_from_json(e, hidden, &s.rows, where);
  else
    throw Error(where + ": \"" + kEmbedding + "\" must be a list of rows or the path of a .npy file, not " + e.dump());
  if (s.rows == 0) throw Error(where + ": \"" + kEmbedding + "\" has no rows");
  if (has_len) {
    const int64_t n = one_int(j[kLengths], kLengths, where);
    if (n < 1 || n > s.rows)
      throw Error(where + ": \"" + kLengths + "\" " + std::to_string(n) + " outside [1, " + std::to_string(s.rows) +
                  "] (the rows of \"" + kEmbedding + "\", " + shape_text(s.rows, hidden) + ")");
    s.rows = n;  // FT: rows past the length are the batch's padding
    s.values.resize(static_cast<size_t>(n * hidden));
  }
  for (size_t i = 0; i < s.values.size(); ++i)
    if (!std::isfinite(s.values[i]))
      throw Error(where + ": \"" + kEmbedding + "\" row " + std::to_string(i / static_cast<size_t>(hidden)) +
                  " holds a value that is not finite in float32");
  return s;
}

void attach_soft_prompt(Request& r, SoftPrompt soft, int64_t* next_id, const std::string& where) {
  if (soft.rows == 0) return;
  if (!r.session.empty())
    throw Error(where + ": a soft prompt (\"request_prompt_type\" 1) cannot start a \"session\" round: the "
                "session's context is held in the KV cache (FasterTransformer refuses it in interactive generation too)");
  if (r.output.context_log_probs)
    throw Error(where + ": \"return_context_log_probs\" with a soft prompt: its rows are not tokens and have no "
                "log probability");
  if (*next_id + soft.rows > INT32_MAX) throw Error(where + ": soft prompt ids exhausted (32-bit token ids)");
  soft.first_id = static_cast<int32_t>(*next_id);
  *next_id += soft.rows;
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(soft.rows) + r.decode.input_ids.size());
  for (int64_t i = 0; i < soft.rows; ++i) ids.push_back(static_cast<int32_t>(soft.first_id + i));
  ids.insert(ids.end(), r.decode.input_ids.begin(), r.decode.input_ids.end());
  r.decode.input_ids = std::move(ids);
  r.decode.virtual_id_end = std::max<int64_t>(r.decode.virtual_id_end, soft.first_id + soft.rows);
  r.soft_prompt = std::move(soft);
}

}  // namespace ftx
