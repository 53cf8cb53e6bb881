#include "lib/serve/pbtxt_writer.h"

#include <cstdio>

namespace ftx::serve::pbtxt {

namespace {

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[ ";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + " ]";
}

}  // namespace

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

void write_tensors(std::ostringstream& o, const char* field, const std::vector<TritonTensor>& ts) {
  using Ragged = TritonTensor::Ragged;
  o << field << " [\n";
  for (size_t i = 0; i < ts.size(); ++i) {
    const TritonTensor& t = ts[i];
    o << "  {\n    name: " << quoted(t.name) << "\n    data_type: " << t.data_type << "\n    dims: " << dims_text(t.dims)
      << "\n";
    if (t.reshape_to_scalar) o << "    reshape: { shape: [ ] }\n";
    if (t.optional) o << "    optional: true\n";
    if (t.ragged != Ragged::kUnset) o << "    allow_ragged_batch: " << (t.ragged == Ragged::kTrue ? "true" : "false") << "\n";
    o << "  }" << (i + 1 < ts.size() ? "," : "") << "\n";
  }
  o << "]\n";
}

void write_parameter(std::ostringstream& o, const char* key, const std::string& value) {
  o << "parameters {\n  key: " << quoted(key) << "\n  value: {\n    string_value: " << quoted(value) << "\n  }\n}\n";
}

void write_cpu_instance(std::ostringstream& o) {
  o << "instance_group [\n  {\n    count: 1\n    kind: KIND_CPU\n  }\n]\n";
}

}  // namespace ftx::serve::pbtxt
