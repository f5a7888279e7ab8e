// numpy's .npy format, versions 1 to 3: the magic "\x93NUMPY", a version,
// a little-endian header length (2 bytes in version 1, 4 after), a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, ...)}
// padded with spaces, then the array's bytes in C order.

#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>

#include <torch/torch.h>

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

constexpr int64_t max_header_bytes = 1 << 16;

/// One entry of the header dict, e.g. 'descr': '<f4' -> "<f4".
std::string dict_entry(const std::string& header, const std::string& key,
                       const std::string& value_pattern, const std::string& path) {
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'" + key + "'\\s*:\\s*" + value_pattern)))
    throw file_error(path + ": the .npy header has no readable '" + key + "' (header: " +
                     header + ")");
  return m[1].str();
}

npy_array read_npy_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || !std::filesystem::is_regular_file(path, ec))
    throw file_error(path + ": cannot open (expected a numpy .npy file)");
  npy_array a;
  a.file_size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  unsigned char start[8] = {};
  if (!in.read(reinterpret_cast<char*>(start), 8) ||
      std::string(reinterpret_cast<char*>(start), 6) != "\x93NUMPY")
    throw file_error(path + ": not a numpy .npy file (no \\x93NUMPY magic)");
  const int major = start[6];
  if (major < 1 || major > 3)
    throw file_error(path + ": .npy format version " + std::to_string(major) +
                     " is not supported (expected 1, 2 or 3)");
  int64_t length = 0;
  const int length_bytes = major == 1 ? 2 : 4;
  unsigned char bytes[4] = {};
  if (!in.read(reinterpret_cast<char*>(bytes), length_bytes))
    throw file_error(path + ": truncated .npy header");
  for (int i = length_bytes - 1; i >= 0; --i)
    length = length * 256 + bytes[i];
  if (length > max_header_bytes)
    throw file_error(path + ": .npy header of " + std::to_string(length) + " bytes, expected at most " +
                     std::to_string(max_header_bytes));
  std::string header(static_cast<size_t>(length), '\0');
  if (!in.read(header.data(), length))
    throw file_error(path + ": truncated .npy header");
  a.data_offset = 8 + length_bytes + length;
  a.descr = dict_entry(header, "descr", "'([^']*)'", path);
  if (dict_entry(header, "fortran_order", "(True|False)", path) == "True")
    throw file_error(path + ": the array is in Fortran order, expected C order (save "
                     "np.ascontiguousarray(x))");
  const std::string dims = dict_entry(header, "shape", "\\(([^)]*)\\)", path);
  std::regex number("\\d+");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), number);
       it != std::sregex_iterator(); ++it)
    a.shape.push_back(std::stoll(it->str()));
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

/// Reads `count` rows of `a` (each `row_bytes`) from `path`, checking the
/// file holds every row its header declares.
void read_rows(const std::string& path, const npy_array& a, int64_t count, int64_t row_bytes,
               void* out) {
  const int64_t rows = a.shape.empty() ? 0 : a.shape[0];
  const int64_t expected = a.data_offset + rows * row_bytes;
  if (a.file_size < expected)
    throw file_error(path + ": truncated: the header declares " + std::to_string(rows) +
                     " rows (" + std::to_string(expected) + " bytes in all), the file has " +
                     std::to_string(a.file_size) + " bytes");
  std::ifstream in(path, std::ios::binary);
  in.seekg(a.data_offset);
  if (!in.read(static_cast<char*>(out), count * row_bytes))
    throw file_error(path + ": read error");
}

const data_spec::split_files& files_of(const data_spec& spec, split which) {
  const auto& files = which == split::train ? spec.train : spec.test;
  if (files.x.empty() || files.y.empty())
    throw file_error("data." + split_name(which) + ": expected the paths of x and y (.npy files)");
  return files;
}

/// The samples' header, checked: [N, H, W] or [N, C, H, W] of uint8 or float32.
std::pair<npy_array, split_header> x_header(const std::string& path) {
  npy_array a = read_npy_header(path);
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
npy_array y_header(const std::string& path, int64_t samples) {
  npy_array a = read_npy_header(path);
  if (item_size(a.descr) == 0 || a.descr == "<f4")
    throw file_error(path + ": y has dtype '" + a.descr + "', expected little-endian integers "
                     "(e.g. int64 '<i8' or uint8 '|u1')");
  if (a.shape.size() != 1 || a.shape[0] != samples)
    throw file_error(path + ": y has " + std::to_string(a.shape.size()) + " dimensions and " +
                     std::to_string(a.shape.empty() ? 0 : a.shape[0]) + " rows, expected [" +
                     std::to_string(samples) + "]: one label per sample of x");
  return a;
}

/// The first `count` labels of `path`, as int64.
at::Tensor read_labels(const std::string& path, const npy_array& a, int64_t count) {
  static const std::vector<std::pair<std::string, at::ScalarType>> types = {
    {"|u1", torch::kUInt8}, {"|i1", torch::kInt8},  {"<i2", torch::kInt16},
    {"<i4", torch::kInt32}, {"<i8", torch::kInt64}, {"<u2", torch::kInt16},
    {"<u4", torch::kInt32}, {"<u8", torch::kInt64}};
  at::ScalarType type = torch::kInt64;
  for (const auto& [name, t] : types)
    if (a.descr == name)
      type = t;
  auto raw = torch::empty({count}, type);
  read_rows(path, a, count, item_size(a.descr), raw.data_ptr());
  // Unsigned types are read as signed ones of their width: a value with the
  // top bit set reads negative, and is out of range like any label < 0.
  return raw.to(torch::kInt64);
}

} // namespace

split_header npy_header(const data_spec& spec, split which) {
  const auto& files = files_of(spec, which);
  auto [x, h] = x_header(files.x);
  read_rows(files.x, x, 0, item_size(x.descr) * h.shape[0] * h.shape[1] * h.shape[2], nullptr);
  read_rows(files.y, y_header(files.y, h.samples), 0, 0, nullptr);
  return h;
}

raw_split read_npy(const data_spec& spec, split which, int64_t count) {
  const auto& files = files_of(spec, which);
  auto [x, h] = x_header(files.x);
  const npy_array y = y_header(files.y, h.samples);
  count = std::min(count, h.samples);
  raw_split out;
  out.samples = torch::empty({count, h.shape[0], h.shape[1], h.shape[2]},
                             x.descr == "|u1" ? torch::kUInt8 : torch::kFloat32);
  read_rows(files.x, x, count, item_size(x.descr) * h.shape[0] * h.shape[1] * h.shape[2],
            out.samples.data_ptr());
  out.labels = read_labels(files.y, y, count);
  check_labels(out.labels, data_classes(spec), files.y);
  return out;
}

int64_t npy_classes(const data_spec& spec) {
  const auto& files = files_of(spec, split::train);
  const auto [x, h] = x_header(files.x);
  const npy_array y = y_header(files.y, h.samples);
  const int64_t count = spec.train_limit > 0 ? std::min(spec.train_limit, h.samples) : h.samples;
  auto labels = read_labels(files.y, y, count);
  if (count == 0)
    throw file_error(files.y + ": no labels (the training split is empty)");
  check_labels(labels, std::numeric_limits<int64_t>::max(), files.y);
  return labels.max().item<int64_t>() + 1;
}

} // namespace baton::model::datasets
