// numpy's .npy format, versions 1 to 3: the magic "\x93NUMPY", a version,
// a little-endian header length (2 bytes in version 1, 4 after), a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, ...)}
// padded with spaces, then the array's bytes in C order.

#include <cctype>
#include <limits>

#include <torch/torch.h>

#include "model/core/data_file.hpp"
#include "model/core/datasets/readers.hpp"
#include "model/core/error.hpp"

namespace baton::model::datasets {

namespace {

/// What an .npy header declares.
struct npy_array {
  std::string descr;          ///< e.g. "|u1", "<f4", "<i8"
  std::vector<int64_t> shape;
  int64_t data_offset = 0;    ///< where the array's bytes begin
  int64_t file_size = 0;
};

/// numpy's own cap on a version 1 header (its length field has 2 bytes);
/// versions 2 and 3 are held to it too.
constexpr int64_t max_header_bytes = 1 << 16;
/// The longest 'descr' read: a type such as '<f4' has three.
constexpr size_t max_descr_chars = 32;
/// The largest dimension read: more digits are an error, not an overflow.
constexpr size_t max_dimension_digits = 18;

/// The header dict, parsed by hand: a Python literal of quoted keys and
/// values that are quoted strings, True/False or tuples of integers. Linear
/// in the header's length (a regex over a 40 KB header recursed until the
/// stack ran out).
class header_parser {
public:
  header_parser(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  /// Reads the dict into `a`; throws file_error naming the file and field.
  void parse(npy_array& a) {
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (skip_spaces() != '}') {
      const std::string key = quoted("a key");
      expect(':');
      if (key == "descr") {
        a.descr = quoted("'descr'");
        if (a.descr.size() > max_descr_chars)
          throw bad("a 'descr' of " + std::to_string(a.descr.size()) + " characters (expected a "
                    "numpy type such as '<f4')");
        has_descr = true;
      } else if (key == "fortran_order") {
        if (word() == "True")
          throw file_error(path_ + ": the array is in Fortran order, expected C order (save "
                           "np.ascontiguousarray(x))");
        has_order = true;
      } else if (key == "shape") {
        a.shape = dimensions();
        has_shape = true;
      } else {
        throw bad("an unknown key '" + key + "' (expected 'descr', 'fortran_order', 'shape')");
      }
      if (skip_spaces() == ',')
        ++at_;
      else if (skip_spaces() != '}')
        throw bad("'" + key + "' followed by neither ',' nor '}'");
    }
    ++at_;
    if (skip_spaces() != '\0')
      throw bad("text after the closing '}'");
    const std::pair<bool, const char*> keys[] = {
      {has_descr, "descr"}, {has_order, "fortran_order"}, {has_shape, "shape"}};
    for (const auto& [has, key] : keys)
      if (!has)
        throw file_error(path_ + ": the .npy header has no readable '" + key + "'");
  }

private:
  /// The next character after spaces and newlines ('\0' at the end).
  char skip_spaces() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t'))
      ++at_;
    return at_ < text_.size() ? text_[at_] : '\0';
  }

  void expect(char c) {
    if (skip_spaces() != c)
      throw bad(std::string{"no '"} + c + "' where one was expected");
    ++at_;
  }

  std::string quoted(const std::string& what) {
    const char quote = skip_spaces();
    if (quote != '\'' && quote != '"')
      throw bad(what + " that is not a quoted string");
    const size_t close = text_.find(quote, at_ + 1);
    if (close == std::string::npos)
      throw bad(what + " without its closing quote");
    std::string value = text_.substr(at_ + 1, close - at_ - 1);
    at_ = close + 1;
    return value;
  }

  std::string word() {
    skip_spaces();
    const size_t begin = at_;
    while (at_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[at_])))
      ++at_;
    std::string w = text_.substr(begin, at_ - begin);
    if (w != "True" && w != "False")
      throw bad("'fortran_order' that is neither True nor False");
    return w;
  }

  /// A tuple of non-negative integers: (), (4,), (4, 28, 28).
  std::vector<int64_t> dimensions() {
    expect('(');
    std::vector<int64_t> out;
    while (skip_spaces() != ')') {
      if (text_[at_] == '-')
        throw bad("a negative dimension in 'shape' (expected sizes from 0)");
      const size_t begin = at_;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_])))
        ++at_;
      if (at_ == begin)
        throw bad("a 'shape' that is not a tuple of integers");
      if (at_ - begin > max_dimension_digits)
        throw bad("a dimension of " + std::to_string(at_ - begin) + " digits in 'shape' "
                  "(expected at most " + std::to_string(max_dimension_digits) + ")");
      out.push_back(std::stoll(text_.substr(begin, at_ - begin)));
      if (skip_spaces() == ',')
        ++at_;
      else if (skip_spaces() != ')')
        throw bad("a 'shape' that is not a tuple of integers");
    }
    ++at_;
    return out;
  }

  file_error bad(const std::string& what) const {
    return file_error(path_ + ": the .npy header has " + what + " at byte " +
                      std::to_string(at_) + " of its dict");
  }

  const std::string& text_;
  const std::string& path_;
  size_t at_ = 0;
};

npy_array read_npy_header(const data_file& file) {
  const std::string& path = file.path();
  npy_array a;
  a.file_size = file.size();
  unsigned char start[8] = {};
  if (a.file_size < 8)
    throw file_error(path + ": not a numpy .npy file (shorter than its magic and version)");
  file.read_at(0, start, 8, "the .npy magic");
  if (std::string(reinterpret_cast<char*>(start), 6) != "\x93NUMPY")
    throw file_error(path + ": not a numpy .npy file (no \\x93NUMPY magic)");
  const int major = start[6];
  if (major < 1 || major > 3)
    throw file_error(path + ": .npy format version " + std::to_string(major) +
                     " is not supported (expected 1, 2 or 3)");
  int64_t length = 0;
  const int length_bytes = major == 1 ? 2 : 4;
  unsigned char bytes[4] = {};
  file.read_at(8, bytes, static_cast<size_t>(length_bytes), "the .npy header length");
  for (int i = length_bytes - 1; i >= 0; --i)
    length = length * 256 + bytes[i];
  if (length > max_header_bytes)
    throw file_error(path + ": .npy header of " + std::to_string(length) + " bytes, expected at most " +
                     std::to_string(max_header_bytes));
  std::string header(static_cast<size_t>(length), '\0');
  file.read_at(8 + length_bytes, header.data(), static_cast<size_t>(length), "the .npy header");
  a.data_offset = 8 + length_bytes + length;
  header_parser(header, path).parse(a);
  return a;
}

/// The size in bytes of one element of `descr`, whose byte order must be
/// little-endian or not matter; 0 for a type baton does not read.
int64_t item_size(const std::string& descr) {
  static const std::vector<std::pair<std::string, int64_t>> known = {
    {"|u1", 1}, {"|i1", 1}, {"<u2", 2}, {"<i2", 2}, {"<u4", 4},
    {"<i4", 4}, {"<u8", 8}, {"<i8", 8}, {"<f4", 4}};
  for (const auto& [name, size] : known)
    if (descr == name)
      return size;
  return 0;
}

/// Reads `count` rows of `a` (each `row_bytes`) from `file`, checking the
/// file holds every row its header declares.
void read_rows(const data_file& file, const npy_array& a, int64_t count, int64_t row_bytes,
               void* out) {
  const int64_t rows = a.shape.empty() ? 0 : a.shape[0];
  const int64_t expected = a.data_offset + rows * row_bytes;
  if (a.file_size < expected)
    throw file_error(file.path() + ": truncated: the header declares " + std::to_string(rows) +
                     " rows (" + std::to_string(expected) + " bytes in all), the file has " +
                     std::to_string(a.file_size) + " bytes");
  if (count > 0)
    file.read_at(a.data_offset, out, static_cast<size_t>(count * row_bytes), "the array");
}

const data_spec::split_files& npy_files_of(const data_spec& spec, split which) {
  const auto& files = which == split::train ? spec.train : spec.test;
  if (files.x.empty() || files.y.empty())
    throw file_error("data." + split_name(which) + ": expected the paths of x and y (.npy files)");
  return files;
}

data_file open_npy(const std::string& path) {
  return data_file(path, "a numpy .npy file");
}

/// The samples' header, checked: [N, H, W] or [N, C, H, W] of uint8 or float32.
std::pair<npy_array, split_header> x_header(const data_file& file) {
  const std::string& path = file.path();
  npy_array a = read_npy_header(file);
  if (a.descr != "|u1" && a.descr != "<f4")
    throw file_error(path + ": x has dtype '" + a.descr + "', expected uint8 ('|u1') or "
                     "float32 ('<f4')");
  if (a.shape.size() != 3 && a.shape.size() != 4)
    throw file_error(path + ": x has " + std::to_string(a.shape.size()) + " dimensions, expected "
                     "[N, H, W] or [N, C, H, W] (channels first)");
  split_header h;
  h.samples = a.shape[0];
  h.shape = a.shape.size() == 3 ? std::vector<int64_t>{1, a.shape[1], a.shape[2]}
                                : std::vector<int64_t>{a.shape[1], a.shape[2], a.shape[3]};
  check_sample_count(h.samples, h.shape, path);
  return {a, h};
}

/// The labels' header, checked against the samples: [N] of integers.
npy_array y_header(const data_file& file, int64_t samples) {
  const std::string& path = file.path();
  npy_array a = read_npy_header(file);
  if (item_size(a.descr) == 0 || a.descr == "<f4")
    throw file_error(path + ": y has dtype '" + a.descr + "', expected little-endian integers "
                     "(e.g. int64 '<i8' or uint8 '|u1')");
  if (a.shape.size() != 1 || a.shape[0] != samples)
    throw file_error(path + ": y has " + std::to_string(a.shape.size()) + " dimensions and " +
                     std::to_string(a.shape.empty() ? 0 : a.shape[0]) + " rows, expected [" +
                     std::to_string(samples) + "]: one label per sample of x");
  return a;
}

/// The first `count` labels of `file`, as int64.
at::Tensor read_labels(const data_file& file, const npy_array& a, int64_t count) {
  static const std::vector<std::pair<std::string, at::ScalarType>> types = {
    {"|u1", torch::kUInt8}, {"|i1", torch::kInt8},  {"<i2", torch::kInt16},
    {"<i4", torch::kInt32}, {"<i8", torch::kInt64}, {"<u2", torch::kInt16},
    {"<u4", torch::kInt32}, {"<u8", torch::kInt64}};
  at::ScalarType type = torch::kInt64;
  for (const auto& [name, t] : types)
    if (a.descr == name)
      type = t;
  auto raw = torch::empty({count}, type);
  read_rows(file, a, count, item_size(a.descr), raw.data_ptr());
  // Unsigned types are read as signed ones of their width: a value with the
  // top bit set reads negative, and is out of range like any label < 0.
  return raw.to(torch::kInt64);
}

int64_t row_bytes(const npy_array& x, const split_header& h) {
  return item_size(x.descr) * h.shape[0] * h.shape[1] * h.shape[2];
}

} // namespace

split_header npy_header(const data_spec& spec, split which) {
  const auto& files = npy_files_of(spec, which);
  const data_file x_file = open_npy(files.x), y_file = open_npy(files.y);
  auto [x, h] = x_header(x_file);
  read_rows(x_file, x, 0, row_bytes(x, h), nullptr);
  read_rows(y_file, y_header(y_file, h.samples), 0, 0, nullptr);
  return h;
}

raw_split read_npy(const data_spec& spec, split which, int64_t count) {
  const auto& files = npy_files_of(spec, which);
  const data_file x_file = open_npy(files.x), y_file = open_npy(files.y);
  auto [x, h] = x_header(x_file);
  const npy_array y = y_header(y_file, h.samples);
  count = std::min(count, h.samples);
  raw_split out;
  out.samples = torch::empty({count, h.shape[0], h.shape[1], h.shape[2]},
                             x.descr == "|u1" ? torch::kUInt8 : torch::kFloat32);
  read_rows(x_file, x, count, row_bytes(x, h), out.samples.data_ptr());
  check_finite(out.samples, files.x);
  out.labels = read_labels(y_file, y, count);
  check_labels(out.labels, data_classes(spec), files.y);
  return out;
}

int64_t npy_classes(const data_spec& spec) {
  const auto& files = npy_files_of(spec, split::train);
  const data_file x_file = open_npy(files.x), y_file = open_npy(files.y);
  const auto [x, h] = x_header(x_file);
  const npy_array y = y_header(y_file, h.samples);
  const int64_t count = spec.train_limit > 0 ? std::min(spec.train_limit, h.samples) : h.samples;
  auto labels = read_labels(y_file, y, count);
  if (count == 0)
    throw file_error(files.y + ": no labels (the training split is empty)");
  check_labels(labels, std::numeric_limits<int64_t>::max(), files.y);
  return labels.max().item<int64_t>() + 1;
}

} // namespace baton::model::datasets
