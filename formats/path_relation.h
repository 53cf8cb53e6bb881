#pragma once
// How an output path relates to an input path once symbolic links are resolved, so that a command
// can refuse an output that is, holds or lies inside one of its inputs before it writes (or, with
// --force, deletes) anything.
#include <string>

namespace ftx {

// `path` made absolute with every symbolic link resolved, without a trailing slash. A path that
// does not exist (yet) resolves through its nearest existing parent; the rest is appended as
// written, lexically normalised.
std::string resolved_path(const std::string& path);

// Whether `inner` is `outer` or lies inside it, component by component (/a/bc is not inside /a/b).
// Both should come from resolved_path.
bool path_within(const std::string& inner, const std::string& outer);

}  // namespace ftx
