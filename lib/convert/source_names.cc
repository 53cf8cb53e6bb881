#include "lib/convert/source_names.h"

#include <algorithm>
#include <cctype>
#include <regex>

namespace ftx {

namespace {

// `pattern` (a rule's regex) written out with its k-th capturing group (from 1) replaced by
// groups[k]; "" when it has regex syntax other than escaped literals and those groups.
std::string render_pattern(const std::string& pattern, const std::map<int, std::string>& groups) {
  std::string out;
  int group = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char ch = pattern[i];
    if (ch == '\\' && i + 1 < pattern.size()) {
      out += pattern[++i];
    } else if (ch == '(') {
      const size_t close = pattern.find(')', i);
      if (close == std::string::npos || pattern.compare(i, 3, "(?:") == 0) return "";
      auto g = groups.find(++group);
      if (g == groups.end()) return "";
      out += g->second;
      i = close;
    } else if (std::string(".*+?[]{}|^$").find(ch) != std::string::npos) {
      return "";
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> layout_source_names(const ArchLayout& layout, const std::string& ft_name) {
  std::vector<std::string> out;
  for (size_t r = 0; r < layout.rules.size(); ++r) {
    // The rule's FT name format as a regex: literal text, each $N one name component.
    const std::string& fmt = layout.rules[r].ft_name;
    std::string re;
    std::vector<int> refs;
    for (size_t i = 0; i < fmt.size(); ++i) {
      if (fmt[i] == '$' && i + 1 < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i + 1]))) {
        refs.push_back(fmt[++i] - '0');
        re += "([^.]+)";
      } else {
        if (std::string(R"(\.^$|()[]{}*+?)").find(fmt[i]) != std::string::npos) re += '\\';
        re += fmt[i];
      }
    }
    std::smatch m;
    if (!std::regex_match(ft_name, m, std::regex(re))) continue;
    std::map<int, std::string> groups;
    for (size_t k = 0; k < refs.size(); ++k) groups[refs[k]] = m[k + 1];
    const std::string name = render_pattern(layout.rules[r].pattern, groups);
    if (!name.empty() && std::regex_match(name, std::regex(layout.rules[r].pattern)) &&
        std::find(out.begin(), out.end(), name) == out.end())
      out.push_back(name);
  }
  return out;
}

void NamePrefixes::add(const std::string& original, const std::string& stripped) {
  if (original.size() < stripped.size()) return;
  const std::string prefix = original.substr(0, original.size() - stripped.size());
  by_first_.emplace(stripped.substr(0, stripped.find('.')), prefix);
  ++count_[prefix];
}

std::string NamePrefixes::restore(const std::string& stripped) const {
  auto it = by_first_.find(stripped.substr(0, stripped.find('.')));
  if (it != by_first_.end()) return it->second + stripped;
  std::string commonest;
  int64_t most = 0;
  for (auto& [p, n] : count_)
    if (n > most) most = n, commonest = p;
  return commonest + stripped;
}

std::function<std::vector<std::string>(const std::string&)> checkpoint_names(const ArchLayout& layout,
                                                                            NamePrefixes prefixes) {
  return [&layout, prefixes = std::move(prefixes)](const std::string& ft_name) {
    std::vector<std::string> names = layout_source_names(layout, ft_name);
    for (auto& n : names) n = prefixes.restore(n);
    return names;
  };
}

}  // namespace ftx
