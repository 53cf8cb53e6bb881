#pragma once
// Text built from the HuggingFace family registry (lib/convert/hf/family.h), so that the list of
// supported model_types is written nowhere by hand: errors, `convert-hf --help`, the subcommand's
// description and the man page's CONFIG.JSON KEYS section (checked against man/ftx-convert-hf.1 by
// tests/unit/hf_config_test.cc).
#include <string>

namespace ftx::hf {

// "gpt2, gpt_bigcode (aliases: santacoder, starcoder), gptj, ...": for error messages.
std::string supported_list();
// "gpt2, gpt_bigcode, santacoder, starcoder, gptj, ...": the values --model takes.
std::string model_flag_list();
// The display names, "GPT-2<sep>GPTBigCode<sep>...<last_sep>Qwen2".
std::string display_list(const std::string& sep, const std::string& last_sep);
// The man page's SUPPORTED MODELS section (.SH and a .TP per family: model_type, display name,
// aliases, examples), roff.
std::string man_supported_table();
// The man page's CONFIG.JSON KEYS subsections (.SS per family, then "every architecture"), roff.
std::string man_key_tables();
// Both, each after a roff comment saying where it goes: `ftx convert-hf --print-man-tables`.
std::string man_tables();

}  // namespace ftx::hf
