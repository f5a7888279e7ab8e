#include "actors/config/names.hpp"

#include <algorithm>

namespace baton::actors {
inline namespace config {

namespace {

// ASCII only, whatever the locale: a name is the same bytes on every host.
bool digit(char c) {
  return c >= '0' && c <= '9';
}

bool name_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || digit(c) || c == '.' || c == '_'
         || c == '-';
}

/// A byte as an error shows it: 'x', or \xNN for a control or non-ASCII byte.
std::string shown_byte(char c) {
  auto byte = static_cast<unsigned char>(c);
  if (byte >= 0x20 && byte < 0x7F)
    return std::string{"'"} + c + "'";
  static const char hex[] = "0123456789abcdef";
  return std::string{"the byte \\x"} + hex[byte >> 4] + hex[byte & 0xF];
}

bool all_digits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), digit);
}

/// Whether `rest` (what follows "stage", "worker" or "shard") is N, .N, N.R
/// or .N.R.
bool numbered(std::string rest) {
  if (!rest.empty() && rest.front() == '.')
    rest.erase(0, 1);
  auto dot = rest.find('.');
  if (dot == std::string::npos)
    return all_digits(rest);
  return all_digits(rest.substr(0, dot)) && all_digits(rest.substr(dot + 1));
}

} // namespace

const std::string& name_rule() {
  static const std::string rule = "a non-empty name of at most " + std::to_string(max_name_bytes)
                                  + " letters, digits, '.', '_' or '-', not starting with '.' "
                                    "or '-'";
  return rule;
}

std::string check_name(const std::string& name) {
  if (name.empty())
    return "it is empty";
  if (name.size() > max_name_bytes)
    return "it is " + std::to_string(name.size()) + " bytes long";
  auto bad = std::find_if_not(name.begin(), name.end(), name_character);
  if (bad != name.end())
    return "it contains " + shown_byte(*bad);
  if (name.front() == '.' || name.front() == '-')
    return std::string{"it starts with '"} + name.front() + "'";
  return "";
}

bool reserved_name(const std::string& name) {
  const std::string key = name_key(name);
  for (const char* fixed : {"source", "coordinator", "embedded", "workers"})
    if (key == fixed)
      return true;
  for (const std::string prefix : {"stage", "worker", "shard"})
    if (key.compare(0, prefix.size(), prefix) == 0 && numbered(key.substr(prefix.size())))
      return true;
  return false;
}

const std::string& reserved_names() {
  static const std::string names =
    "source, coordinator, embedded, workers, stageN, stageN.R, worker.N, shard.N";
  return names;
}

bool reserved_file_name(const std::string& name) {
  const std::string key = name_key(name);
  for (const std::string file : {"run.lock", "run.yaml"})
    if (key == file || key.compare(0, file.size() + 1, file + ".") == 0)
      return true;
  return false;
}

const std::string& reserved_file_names() {
  static const std::string names =
    "run.lock, run.yaml, and names starting with 'run.lock.' or 'run.yaml.'";
  return names;
}

std::string name_key(const std::string& name) {
  std::string key = name;
  for (char& c : key)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return key;
}

} // namespace config
} // namespace baton::actors
