#pragma once
// The FT layout's files: config.ini (inih semantics: case-insensitive look-ups, `;` comments), raw
// little-endian .bin tensors, and output folders that appear only when complete.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ftx {

class IniFile {
 public:
  // Throws Error(path, ...) when the file is missing or does not parse (with the line number).
  static IniFile read(const std::string& path);
  static IniFile parse(const std::string& text, const std::string& origin);

  const std::string& path() const { return path_; }
  bool has(const std::string& section, const std::string& key) const;
  bool has_section(const std::string& section) const;
  // Throws Error(path, "missing key 'key' in section [section]").
  std::string get(const std::string& section, const std::string& key) const;
  std::string get_or(const std::string& section, const std::string& key, const std::string& def) const;
  // Throw Error naming the key and the offending text when the value is not a number.
  int64_t get_int(const std::string& section, const std::string& key) const;
  int64_t get_int_or(const std::string& section, const std::string& key, int64_t def) const;
  double get_double(const std::string& section, const std::string& key) const;
  double get_double_or(const std::string& section, const std::string& key, double def) const;
  // true/yes/on/1 and false/no/off/0, any case (as inih's GetBoolean); else Error.
  bool get_bool_or(const std::string& section, const std::string& key, bool def) const;
  std::vector<std::string> sections() const;  // in file order
  // The keys and values of `section` in file order (empty when there is no such section).
  std::vector<std::pair<std::string, std::string>> entries(const std::string& section) const;

  // Writing keeps insertion order; keys are written as given (`key = value`).
  void set(const std::string& section, const std::string& key, const std::string& value);
  std::string to_string() const;
  void write(const std::string& path) const;

 private:
  std::string path_;
  struct Section {
    std::string name;
    std::vector<std::pair<std::string, std::string>> entries;
  };
  std::vector<Section> sections_;
  const Section* find_section(const std::string& name) const;
};

// Writes raw bytes to `path`, checking every write (a full disk is an Error naming the file).
void write_file(const std::string& path, const void* data, size_t nbytes);

// A scratch folder path whose tree is removed (errors ignored) when the scope ends, however it
// ends: intermediate folders of a multi-step job that must never outlive it.
class TransientDir {
 public:
  explicit TransientDir(std::string path);  // also removed on a fatal signal (pending_outputs.h)
  ~TransientDir();
  TransientDir(const TransientDir&) = delete;
  TransientDir& operator=(const TransientDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string made_parent_;  // its parent, when that did not exist yet (removed again if empty)
  int pending_ = -1;
};

// A folder written under a temporary sibling name (`.<name>.tmp-<pid>`) and renamed into place by
// commit(). Without `force`, an existing folder is an Error and is left untouched; with it, the old
// folder is replaced only at commit. An uncommitted folder is removed by the destructor, or by the
// handler of a fatal signal, and the temporaries of earlier runs that were killed are removed (with
// a note) when the same output is written again (formats/pending_outputs.h).
class OutputDir {
 public:
  OutputDir(const std::string& final_path, bool force);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  const std::string& final_path() const { return final_path_; }
  const std::string& tmp_path() const { return tmp_path_; }
  std::string file(const std::string& name) const { return tmp_path_ + "/" + name; }
  void commit();

 private:
  std::string final_path_, tmp_path_;
  bool force_, committed_ = false;
  int pending_ = -1;
  std::vector<std::string> created_;  // folders made for the output, innermost first
};

}  // namespace ftx
