#include "formats/ft_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "formats/pending_outputs.h"

namespace ftx {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool iequal(const std::string& a, const std::string& b) { return lower(a) == lower(b); }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

std::string strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// inih's find_chars_or_comment: the first of `chars`, or a ';' preceded by white space.
size_t find_chars_or_comment(const std::string& s, size_t from, const char* chars) {
  bool was_space = false;
  for (size_t i = from; i < s.size(); ++i) {
    if (chars && std::strchr(chars, s[i])) return i;
    if (was_space && s[i] == ';') return i;
    was_space = is_space(s[i]);
  }
  return s.size();
}

}  // namespace

// ---- IniFile ---------------------------------------------------------------------------------

IniFile IniFile::read(const std::string& path) {
  auto f = MappedFile::open(path);
  return parse(std::string(reinterpret_cast<const char*>(f->data()), f->size()), path);
}

// Follows inih's ini_parse_stream (as FT's INIReader uses it): `;`/`#` start-of-line comments,
// inline `;` comments after white space, `=` or `:` separators, indented lines continuing the
// previous value, and repeated keys joined with "\n" (INIReader's ValueHandler).
IniFile IniFile::parse(const std::string& text, const std::string& origin) {
  IniFile ini;
  ini.path_ = origin;
  std::string section, prev_name;
  size_t pos = 0;
  int lineno = 0;
  auto add = [&](const std::string& name, const std::string& value) {
    Section* sec = nullptr;
    for (auto& s : ini.sections_)
      if (iequal(s.name, section)) sec = &s;
    if (!sec) {
      ini.sections_.push_back(Section{section, {}});
      sec = &ini.sections_.back();
    }
    for (auto& kv : sec->entries) {
      if (iequal(kv.first, name)) {
        kv.second += "\n" + value;
        return;
      }
    }
    sec->entries.emplace_back(name, value);
  };
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    if (lineno == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);  // UTF-8 BOM
    if (line.find('\0') != std::string::npos)
      throw Error(origin, "line " + std::to_string(lineno) + ": NUL byte in an INI file");
    // rstrip, then lskip: `indented` says whether the line began with white space.
    size_t e = line.size();
    while (e > 0 && is_space(line[e - 1])) --e;
    size_t b = 0;
    while (b < e && is_space(line[b])) ++b;
    const bool indented = b > 0;
    const std::string start = line.substr(b, e - b);
    if (start.empty() || start[0] == ';' || start[0] == '#') continue;
    if (!prev_name.empty() && indented) {  // continuation of the previous value
      add(prev_name, strip(start.substr(0, find_chars_or_comment(start, 0, nullptr))));
      continue;
    }
    if (start[0] == '[') {
      size_t close = find_chars_or_comment(start, 1, "]");
      if (close >= start.size() || start[close] != ']')
        throw Error(origin, "line " + std::to_string(lineno) + ": section header without ']': " + start);
      section = start.substr(1, close - 1);
      prev_name.clear();
      bool exists = false;
      for (const auto& s : ini.sections_) exists = exists || iequal(s.name, section);
      if (!exists) ini.sections_.push_back(Section{section, {}});
      continue;
    }
    size_t sep = find_chars_or_comment(start, 0, "=:");
    if (sep >= start.size() || (start[sep] != '=' && start[sep] != ':'))
      throw Error(origin, "line " + std::to_string(lineno) + ": expected 'key = value' or '[section]', got '" +
                              start + "'");
    const std::string name = strip(start.substr(0, sep));
    std::string value = start.substr(sep + 1);
    size_t comment = find_chars_or_comment(value, 0, nullptr);
    value = strip(value.substr(0, comment));
    prev_name = name;
    add(name, value);
  }
  return ini;
}

const IniFile::Section* IniFile::find_section(const std::string& name) const {
  for (const auto& s : sections_)
    if (iequal(s.name, name)) return &s;
  return nullptr;
}

bool IniFile::has_section(const std::string& section) const { return find_section(section) != nullptr; }

bool IniFile::has(const std::string& section, const std::string& key) const {
  const Section* s = find_section(section);
  if (!s) return false;
  for (const auto& kv : s->entries)
    if (iequal(kv.first, key)) return true;
  return false;
}

std::string IniFile::get(const std::string& section, const std::string& key) const {
  if (const Section* s = find_section(section))
    for (const auto& kv : s->entries)
      if (iequal(kv.first, key)) return kv.second;
  throw Error(path_, "missing key '" + key + "' in section [" + section + "]");
}

std::string IniFile::get_or(const std::string& section, const std::string& key, const std::string& def) const {
  return has(section, key) ? get(section, key) : def;
}

int64_t IniFile::get_int(const std::string& section, const std::string& key) const {
  const std::string v = get(section, key);
  const std::string t = strip(v);
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || *end != '\0' || errno == ERANGE)
    throw Error(path_, "[" + section + "] " + key + " = '" + v + "' is not an integer");
  return n;
}

int64_t IniFile::get_int_or(const std::string& section, const std::string& key, int64_t def) const {
  return has(section, key) ? get_int(section, key) : def;
}

double IniFile::get_double(const std::string& section, const std::string& key) const {
  const std::string v = get(section, key);
  const std::string t = strip(v);
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0')
    throw Error(path_, "[" + section + "] " + key + " = '" + v + "' is not a number");
  return d;
}

double IniFile::get_double_or(const std::string& section, const std::string& key, double def) const {
  return has(section, key) ? get_double(section, key) : def;
}

bool IniFile::get_bool_or(const std::string& section, const std::string& key, bool def) const {
  if (!has(section, key)) return def;
  const std::string v = get(section, key);
  const std::string t = lower(strip(v));
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  throw Error(path_, "[" + section + "] " + key + " = '" + v + "' is not a boolean (true/false/yes/no/on/off/1/0)");
}

std::vector<std::string> IniFile::sections() const {
  std::vector<std::string> out;
  for (const auto& s : sections_) out.push_back(s.name);
  return out;
}

std::vector<std::pair<std::string, std::string>> IniFile::entries(const std::string& section) const {
  const Section* s = find_section(section);
  return s ? s->entries : std::vector<std::pair<std::string, std::string>>{};
}

void IniFile::set(const std::string& section, const std::string& key, const std::string& value) {
  Section* sec = nullptr;
  for (auto& s : sections_)
    if (iequal(s.name, section)) sec = &s;
  if (!sec) {
    sections_.push_back(Section{section, {}});
    sec = &sections_.back();
  }
  for (auto& kv : sec->entries) {
    if (iequal(kv.first, key)) {
      kv.second = value;
      return;
    }
  }
  sec->entries.emplace_back(key, value);
}

// Python configparser's layout: "[section]", "key = value" lines, a blank line after each
// section; a multi-line value continues on lines indented with a tab (inih joins them back).
std::string IniFile::to_string() const {
  std::string out;
  for (const auto& s : sections_) {
    if (!s.name.empty()) out += "[" + s.name + "]\n";
    for (const auto& kv : s.entries) {
      std::string v = kv.second;
      for (size_t p = 0; (p = v.find('\n', p)) != std::string::npos; p += 2) v.insert(p + 1, "\t");
      out += kv.first + " = " + v + "\n";
    }
    out += "\n";
  }
  return out;
}

void IniFile::write(const std::string& path) const {
  const std::string s = to_string();
  write_file(path, s.data(), s.size());
}

// ---- write_file ------------------------------------------------------------------------------

void write_file(const std::string& path, const void* data, size_t nbytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path, std::string("cannot create: ") + std::strerror(errno));
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t left = nbytes;
  while (left > 0) {
    // Linux writes at most ~2 GiB per call; loop over short writes.
    ssize_t k = ::write(fd, p, left < (1u << 30) ? left : (1u << 30));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      int e = k < 0 ? errno : EIO;
      ::close(fd);
      throw Error(path, std::string("write failed: ") + std::strerror(e) + write_error_hint(e));
    }
    p += k;
    left -= static_cast<size_t>(k);
  }
  // Some file systems (NFS, tmpfs quotas) report a full disk only at close.
  if (::close(fd) != 0) throw Error(path, std::string("write failed: ") + std::strerror(errno) + write_error_hint(errno));
}

// ---- OutputDir -------------------------------------------------------------------------------

namespace fs = std::filesystem;

namespace {

bool exists_nofollow(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

void remove_tree_quietly(const std::string& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

}  // namespace

TransientDir::TransientDir(std::string path) : path_(std::move(path)) {
  const fs::path parent = fs::path(path_).parent_path();
  if (!parent.empty() && !exists_nofollow(parent.string())) made_parent_ = parent.string();
  pending_ = register_pending_output(path_, "", made_parent_);
}

TransientDir::~TransientDir() {
  unregister_pending_output(pending_);
  remove_tree_quietly(path_);
  if (!made_parent_.empty()) ::rmdir(made_parent_.c_str());  // made for the scratch folder: gone when empty
}

OutputDir::OutputDir(const std::string& final_path, bool force) : force_(force) {
  std::string p = final_path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const fs::path fp(p);
  const std::string base = fp.filename().string();
  if (p.empty() || base.empty() || base == "." || base == "..")
    throw Error(final_path, "not a usable output folder name");
  final_path_ = p;
  if (exists_nofollow(final_path_) && !force_)
    throw Error(final_path_ + " exists; use --force to overwrite");
  const std::string parent = fp.has_parent_path() ? fp.parent_path().string() : ".";
  // The folders made for it go again if it is never committed (a failed run leaves nothing).
  for (fs::path p = parent; !p.empty() && !exists_nofollow(p.string()); p = p.parent_path()) {
    created_.push_back(p.string());
    if (!p.has_parent_path() || p.parent_path() == p) break;
  }
  tmp_path_ = parent + "/." + base + ".tmp-" + std::to_string(::getpid());
  // Registered before the folder exists: a signal the moment it appears finds it (a watcher that
  // signals on seeing the folder raced the registration). The destructor does not run for a
  // constructor that throws, so a failure below unregisters it.
  pending_ = register_pending_output(tmp_path_, final_path_, created_.empty() ? "" : created_.back());
  try {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw Error(parent, "cannot create folder: " + ec.message());
    // Unfinished outputs of earlier runs that were killed (their own cleanup could not run).
    sweep_stale_temporaries(parent, base);
    remove_tree_quietly(tmp_path_);  // left over by an earlier run that had this pid
    if (::mkdir(tmp_path_.c_str(), 0755) != 0)
      throw Error(tmp_path_, std::string("cannot create folder: ") + std::strerror(errno));
  } catch (...) {
    unregister_pending_output(pending_);
    for (const auto& d : created_) ::rmdir(d.c_str());
    throw;
  }
}

OutputDir::~OutputDir() {
  unregister_pending_output(pending_);
  if (committed_) return;
  remove_tree_quietly(tmp_path_);
  for (const auto& d : created_) ::rmdir(d.c_str());  // innermost first; only while empty
}

void OutputDir::commit() {
  if (committed_) return;
  if (!exists_nofollow(final_path_)) {
    if (::rename(tmp_path_.c_str(), final_path_.c_str()) != 0)
      throw Error(final_path_, std::string("cannot move the finished output into place: ") + std::strerror(errno));
    committed_ = true;
    unregister_pending_output(pending_);
    pending_ = -1;
    return;
  }
  if (!force_) throw Error(final_path_ + " exists; use --force to overwrite");
  // Move the old folder aside first, so that a failed rename leaves it where it was.
  const fs::path fp(final_path_);
  const std::string parent = fp.has_parent_path() ? fp.parent_path().string() : ".";
  const std::string old = parent + "/." + fp.filename().string() + ".old-" + std::to_string(::getpid());
  remove_tree_quietly(old);
  if (::rename(final_path_.c_str(), old.c_str()) != 0)
    throw Error(final_path_, std::string("cannot move the old output aside: ") + std::strerror(errno));
  if (::rename(tmp_path_.c_str(), final_path_.c_str()) != 0) {
    int e = errno;
    ::rename(old.c_str(), final_path_.c_str());
    throw Error(final_path_, std::string("cannot move the finished output into place: ") + std::strerror(e));
  }
  committed_ = true;
  unregister_pending_output(pending_);
  pending_ = -1;
  remove_tree_quietly(old);
}

}  // namespace ftx
