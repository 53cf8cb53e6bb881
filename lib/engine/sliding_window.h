#pragma once
// A model with a sliding attention window W (config.ini sliding_window, Mistral's) attends to its
// last W positions only. A circular KV cache of at most W positions (--memory-len) computes that;
// without one, a position at or beyond W would attend further back than the model does, so it is
// refused. The engine checks every position it runs; generate checks each prompt before it runs
// (the prompt's file and line, or its request and session, named), with the same words.
#include <cstdint>
#include <string>

namespace ftx {

// The first position of [first, last] beyond the window that a cache of `memory_len` (0: not
// circular) cannot compute, or -1 when there is none (no window, a circular cache of at most W, or
// every position below W).
int64_t first_position_beyond_window(int64_t window, int64_t memory_len, int64_t first, int64_t last);

// "position P is beyond the model's sliding attention window (config.ini sliding_window = W); run
// with --memory-len W to attend to exactly the last W positions, as the model does".
std::string beyond_window_message(int64_t position, int64_t window);

}  // namespace ftx
