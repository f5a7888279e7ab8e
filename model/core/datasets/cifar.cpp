// CIFAR-10 and CIFAR-100 in their binary format: records of label byte(s)
// and 3072 pixel bytes (1024 red, 1024 green, 1024 blue, rows in order).


#include <torch/torch.h>

#include "model/core/data_file.hpp"
#include "model/core/datasets/readers.hpp"
#include "model/core/error.hpp"

namespace baton::model::datasets {

namespace {

constexpr int64_t cifar_side = 32;
constexpr int64_t cifar_pixels = 3 * cifar_side * cifar_side;

/// The label bytes before a record's pixels: CIFAR-10 one, CIFAR-100 two
/// (coarse, then fine).
int64_t label_bytes(const data_spec& spec) { return spec.kind == "cifar100" ? 2 : 1; }
int64_t record_bytes(const data_spec& spec) { return label_bytes(spec) + cifar_pixels; }

/// The label byte of a record that is its class.
int64_t label_offset(const data_spec& spec) {
  return spec.kind == "cifar100" && spec.label == "fine" ? 1 : 0;
}

std::vector<std::string> cifar_files_of(const data_spec& spec, split which) {
  std::vector<std::string> names;
  if (spec.kind == "cifar100")
    names = {which == split::train ? "train.bin" : "test.bin"};
  else if (which == split::test)
    names = {"test_batch.bin"};
  else
    for (int i = 1; i <= 5; ++i)
      names.push_back("data_batch_" + std::to_string(i) + ".bin");
  for (auto& name : names)
    name = spec.path + "/" + name;
  return names;
}

data_file open_batch(const data_spec& spec, const std::string& path) {
  return data_file(path, "a " + spec.kind + " binary batch file");
}

/// The records of `file`, from its size.
int64_t records_in(const data_spec& spec, const data_file& file) {
  if (file.size() % record_bytes(spec) != 0)
    throw file_error(file.path() + ": truncated: " + std::to_string(file.size()) +
                     " bytes is not a whole number of " + std::to_string(record_bytes(spec)) +
                     "-byte " + spec.kind + " records");
  return file.size() / record_bytes(spec);
}

} // namespace

split_header cifar_header(const data_spec& spec, split which) {
  split_header h;
  h.shape = {3, cifar_side, cifar_side};
  for (const auto& path : cifar_files_of(spec, which))
    h.samples += records_in(spec, open_batch(spec, path));
  return h;
}

raw_split read_cifar(const data_spec& spec, split which, int64_t count) {
  const int64_t classes = data_classes(spec);
  count = std::min(count, cifar_header(spec, which).samples);
  raw_split out;
  out.samples = torch::empty({count, 3, cifar_side, cifar_side}, torch::kUInt8);
  out.labels = torch::empty({count}, torch::kInt64);
  auto* pixels = out.samples.data_ptr<uint8_t>();
  auto* labels = out.labels.data_ptr<int64_t>();
  std::vector<char> record(static_cast<size_t>(record_bytes(spec)));
  int64_t done = 0;
  for (const auto& path : cifar_files_of(spec, which)) {
    if (done == count)
      break;
    const data_file file = open_batch(spec, path);
    const int64_t records = records_in(spec, file);
    for (int64_t r = 0; done < count && r < records; ++r, ++done) {
      file.read_at(r * record_bytes(spec), record.data(), record.size(),
                   "record " + std::to_string(r));
      const int64_t label = static_cast<unsigned char>(record[label_offset(spec)]);
      if (label >= classes)
        throw file_error(path + ": record " + std::to_string(r) + " has label " +
                         std::to_string(label) + ", expected 0.." + std::to_string(classes - 1));
      labels[done] = label;
      std::copy(record.begin() + label_bytes(spec), record.end(), pixels + done * cifar_pixels);
    }
  }
  return out;
}

} // namespace baton::model::datasets
