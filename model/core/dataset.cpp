#include "model/core/dataset.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include <torch/torch.h>
#include <zlib.h>

#include "model/core/error.hpp"

namespace baton::model {

namespace {

// -- IDX (.gz) files ---------------------------------------------------------

constexpr uint32_t idx_images_magic = 2051; // 0x00000803: ubyte, 3 dimensions
constexpr uint32_t idx_labels_magic = 2049; // 0x00000801: ubyte, 1 dimension
constexpr int64_t mnist_side = 28;
constexpr uint32_t max_idx_count = 1u << 24;

// Fashion-MNIST's training-set pixel statistics (after scaling to [0, 1]).
constexpr double fashion_mnist_mean = 0.2860;
constexpr double fashion_mnist_std = 0.3530;

struct gz_closer {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using gz_file = std::unique_ptr<gzFile_s, gz_closer>;

/// Reads exactly `n` bytes or throws naming the file and what was being read.
void gz_read_exact(gzFile f, const std::string& path, void* out, size_t n,
                   const char* what) {
  auto* bytes = static_cast<unsigned char*>(out);
  size_t done = 0;
  while (done < n) {
    // gzread takes an unsigned length; read in chunks well below its limit.
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    int got = gzread(f, bytes + done, chunk);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      throw file_error(path + ": corrupt gzip data while reading " + what + " (" +
                       (msg ? msg : "unknown zlib error") + ")");
    }
    if (got == 0)
      throw file_error(path + ": truncated: expected " + std::to_string(n) + " bytes of " +
                       what + ", got " + std::to_string(done));
    done += static_cast<size_t>(got);
  }
}

/// After the last expected byte: the stream must end here, and reaching its
/// end makes zlib check the gzip trailer (CRC-32 and length), which is what
/// catches corruption that still inflates.
void gz_expect_end(gzFile f, const std::string& path) {
  unsigned char extra = 0;
  int got = gzread(f, &extra, 1);
  if (got < 0) {
    int code = 0;
    const char* msg = gzerror(f, &code);
    throw file_error(path + ": corrupt gzip data (" + (msg ? msg : "unknown zlib error") + ")");
  }
  if (got > 0)
    throw file_error(path + ": longer than its IDX header declares");
}

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) |
         uint32_t{p[3]};
}

gz_file gz_open(const std::string& path) {
  // gzopen opens any file (a directory too) and reads a FIFO without end:
  // only a regular file is a dataset file.
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec)
    throw file_error(path + ": cannot open: " + ec.message() +
                     " (expected a Fashion-MNIST IDX .gz file)");
  if (!std::filesystem::is_regular_file(status))
    throw file_error(path + ": cannot open: not a regular file (expected a Fashion-MNIST IDX .gz "
                       "file)");
  errno = 0;
  gz_file f{gzopen(path.c_str(), "rb")};
  if (!f) {
    std::string why = errno != 0 ? std::string{": "} + std::strerror(errno) : "";
    throw file_error(path + ": cannot open" + why + " (expected a Fashion-MNIST IDX .gz file)");
  }
  gzbuffer(f.get(), 1 << 18); // fewer, larger reads: the images file is 26 MB
  return f;
}

/// Reads the header of an IDX file and returns its dimensions after the magic.
std::vector<uint32_t> read_idx_header(gzFile f, const std::string& path,
                                      uint32_t magic, size_t dims) {
  std::array<unsigned char, 16> header{};
  gz_read_exact(f, path, header.data(), 4 * (dims + 1), "the IDX header");
  uint32_t got = big_endian_u32(header.data());
  if (got != magic)
    throw file_error(path + ": bad IDX magic number " + std::to_string(got) + ", expected " +
                     std::to_string(magic));
  std::vector<uint32_t> sizes;
  for (size_t i = 0; i < dims; ++i)
    sizes.push_back(big_endian_u32(header.data() + 4 * (i + 1)));
  return sizes;
}

/// Reads and checks the header of an IDX images file; returns the number of
/// images it declares.
int64_t read_images_header(gzFile f, const std::string& path) {
  auto dims = read_idx_header(f, path, idx_images_magic, 3);
  if (dims[1] != mnist_side || dims[2] != mnist_side)
    throw file_error(path + ": images are " + std::to_string(dims[1]) + "x" +
                     std::to_string(dims[2]) + ", expected 28x28");
  // A corrupt header must not turn into a multi-gigabyte allocation.
  if (dims[0] > max_idx_count)
    throw file_error(path + ": declares " + std::to_string(dims[0]) + " images, expected at most " +
                     std::to_string(max_idx_count));
  return dims[0];
}

/// Reads and checks the header of an IDX labels file: `total` labels.
void read_labels_header(gzFile f, const std::string& path, int64_t total) {
  auto dims = read_idx_header(f, path, idx_labels_magic, 1);
  if (dims[0] != total)
    throw file_error(path + ": declares " + std::to_string(dims[0]) + " labels, expected " +
                     std::to_string(total) + " (one per image)");
}

/// The paths of a split's images and labels files in `dir`.
std::pair<std::string, std::string> fashion_mnist_files(const std::string& dir, split which) {
  const std::string prefix = which == split::train ? "train" : "t10k";
  return {dir + "/" + prefix + "-images-idx3-ubyte.gz",
          dir + "/" + prefix + "-labels-idx1-ubyte.gz"};
}

/// Reads the first `count` images (all when `limit` is 0); `total` is the
/// number the file declares.
at::Tensor read_idx_images(const std::string& path, int64_t limit, int64_t& total,
                           int64_t& count) {
  auto f = gz_open(path);
  total = read_images_header(f.get(), path);
  count = total;
  if (limit > 0 && limit < count)
    count = limit;
  auto bytes = torch::empty({count, 1, mnist_side, mnist_side}, torch::kUInt8);
  gz_read_exact(f.get(), path, bytes.data_ptr(), static_cast<size_t>(bytes.numel()),
                "the pixels");
  if (count == total) // with a limit the rest is not read, nor checked
    gz_expect_end(f.get(), path);
  return bytes;
}

at::Tensor read_idx_labels(const std::string& path, int64_t total, int64_t count) {
  auto f = gz_open(path);
  read_labels_header(f.get(), path, total);
  auto bytes = torch::empty({count}, torch::kUInt8);
  gz_read_exact(f.get(), path, bytes.data_ptr(), static_cast<size_t>(count), "the labels");
  if (count == total)
    gz_expect_end(f.get(), path);
  if (count > 0 && bytes.max().item<int64_t>() > 9)
    throw file_error(path + ": label " + std::to_string(bytes.max().item<int64_t>()) +
                     " out of range, expected 0..9");
  return bytes.to(torch::kInt64);
}

// -- deterministic random numbers ----------------------------------------------

/// SplitMix64's finaliser: spreads the bits of a seed before it seeds a
/// Mersenne twister, so that nearby seeds give unrelated streams.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Uniform integer in [0, bound), unbiased (rejection), and unlike
/// std::uniform_int_distribution identical on every standard library.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound; // 2^64 mod bound
  for (;;) {
    uint64_t r = rng();
    if (r >= threshold)
      return r % bound;
  }
}

/// Uniform float in [-1, 1) from the top 24 bits: exact in float arithmetic.
float uniform_signed(std::mt19937_64& rng) {
  return static_cast<float>(rng() >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

// -- CIFAR-10 -------------------------------------------------------------------

constexpr int64_t cifar_side = 32;
constexpr int64_t cifar_pixels = 3 * cifar_side * cifar_side;
constexpr int64_t cifar_record = 1 + cifar_pixels;

std::vector<unsigned char> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw file_error(path + ": cannot open (expected a CIFAR-10 binary batch file)");
  auto size = static_cast<size_t>(in.tellg());
  std::vector<unsigned char> bytes(size);
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    throw file_error(path + ": read error");
  return bytes;
}

} // namespace

int64_t dataset_classes(const std::string& name) {
  if (name == "fashion-mnist" || name == "cifar10")
    return fashion_mnist_classes;
  return name == "synthetic" ? synthetic_classes : 0;
}

int64_t fashion_mnist_size(const std::string& dir, split which) {
  const auto [images_path, labels_path] = fashion_mnist_files(dir, which);
  const int64_t total = read_images_header(gz_open(images_path).get(), images_path);
  read_labels_header(gz_open(labels_path).get(), labels_path, total);
  return total;
}

dataset load_fashion_mnist(const std::string& dir, split which, int64_t limit) {
  const auto [images_path, labels_path] = fashion_mnist_files(dir, which);
  int64_t total = 0, count = 0;
  auto pixels = read_idx_images(images_path, limit, total, count);
  dataset out;
  out.name = "fashion-mnist";
  out.labels = read_idx_labels(labels_path, total, count);
  out.images = pixels.to(torch::kFloat32)
                   .div_(255.0)
                   .sub_(fashion_mnist_mean)
                   .div_(fashion_mnist_std);
  out.classes = fashion_mnist_classes;
  return out;
}

dataset make_synthetic(int64_t n, int64_t c, int64_t h, int64_t w, int64_t classes,
                       uint64_t seed) {
  if (n < 0 || c <= 0 || h <= 0 || w <= 0 || classes <= 0)
    throw error("synthetic dataset: expected n >= 0 and positive c, h, w, classes");
  const int64_t per_sample = c * h * w;
  // Each class has a fixed +-0.5 pattern; a sample is its class pattern plus
  // uniform noise of variance 0.75 (total variance 1), so a linear model can
  // learn the labels. The patterns depend on the shape and the number of
  // classes only, not on the seed: a training set and a test set made with
  // different seeds describe the same classes.
  std::mt19937_64 pattern_rng(mix64(0x5eed5eedULL ^ mix64(static_cast<uint64_t>(per_sample)) ^
                                    static_cast<uint64_t>(classes)));
  auto patterns = torch::empty({classes, per_sample}, torch::kFloat32);
  float* pattern = patterns.data_ptr<float>();
  for (int64_t i = 0; i < classes * per_sample; ++i)
    pattern[i] = (pattern_rng() >> 63) ? 0.5f : -0.5f;
  std::mt19937_64 rng(mix64(seed));
  auto labels = torch::empty({n}, torch::kInt64);
  auto images = torch::empty({n, c, h, w}, torch::kFloat32);
  int64_t* label = labels.data_ptr<int64_t>();
  float* pixel = images.data_ptr<float>();
  const float noise_scale = 1.5f; // uniform [-1.5, 1.5) has variance 0.75
  for (int64_t s = 0; s < n; ++s) {
    label[s] = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(classes)));
    const float* p = pattern + label[s] * per_sample;
    float* out = pixel + s * per_sample;
    for (int64_t i = 0; i < per_sample; ++i)
      out[i] = p[i] + noise_scale * uniform_signed(rng);
  }
  dataset out;
  out.name = "synthetic";
  out.images = images;
  out.labels = labels;
  out.classes = classes;
  return out;
}

dataset load_cifar10_binary(const std::vector<std::string>& files, int64_t limit) {
  std::vector<int64_t> labels;
  std::vector<unsigned char> pixels;
  for (const auto& path : files) {
    if (limit > 0 && static_cast<int64_t>(labels.size()) >= limit)
      break;
    auto bytes = read_whole_file(path);
    if (bytes.size() % cifar_record != 0)
      throw file_error(path + ": truncated: " + std::to_string(bytes.size()) +
                       " bytes is not a whole number of 3073-byte CIFAR-10 records");
    for (size_t at = 0; at < bytes.size(); at += cifar_record) {
      if (limit > 0 && static_cast<int64_t>(labels.size()) >= limit)
        break;
      if (bytes[at] > 9)
        throw file_error(path + ": record " + std::to_string(at / cifar_record) + " has label " +
                         std::to_string(bytes[at]) + ", expected 0..9");
      labels.push_back(bytes[at]);
      pixels.insert(pixels.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                    bytes.begin() + static_cast<std::ptrdiff_t>(at + cifar_record));
    }
  }
  const auto n = static_cast<int64_t>(labels.size());
  auto raw = torch::from_blob(pixels.data(), {n, 3, cifar_side, cifar_side}, torch::kUInt8);
  // CIFAR-10 training-set channel statistics (after scaling to [0, 1]).
  auto mean = torch::tensor({0.4914f, 0.4822f, 0.4465f}).view({1, 3, 1, 1});
  auto stddev = torch::tensor({0.2470f, 0.2435f, 0.2616f}).view({1, 3, 1, 1});
  dataset out;
  out.name = "cifar10";
  out.images = raw.to(torch::kFloat32).div_(255.0).sub_(mean).div_(stddev);
  out.labels = torch::tensor(labels, torch::kInt64);
  out.classes = 10;
  return out;
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int32_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  std::mt19937_64 rng(mix64(mix64(seed) ^ static_cast<uint64_t>(static_cast<uint32_t>(epoch))));
  // Fisher-Yates, written out: std::shuffle's use of the engine is
  // implementation-defined, this is the same on every machine.
  for (size_t i = order.size(); i > 1; --i) {
    auto j = static_cast<size_t>(uniform_below(rng, i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<int64_t> shard(const std::vector<int64_t>& order, int32_t index, int32_t count) {
  if (count <= 0 || index < 0 || index >= count)
    throw error("shard " + std::to_string(index) + " of " + std::to_string(count) +
                ": expected 0 <= index < count");
  const auto n = static_cast<int64_t>(order.size());
  const int64_t base = n / count, extra = n % count;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  const int64_t size = base + (index < extra ? 1 : 0);
  return {order.begin() + begin, order.begin() + begin + size};
}

std::pair<at::Tensor, at::Tensor> gather(const dataset& data, const std::vector<int64_t>& ids) {
  const int64_t n = data.size();
  for (int64_t id : ids)
    if (id < 0 || id >= n)
      throw error(data.name + ": sample id " + std::to_string(id) + " out of range, expected 0.." +
                  std::to_string(n - 1));
  auto index = torch::tensor(ids, torch::kInt64);
  return {data.images.index_select(0, index), data.labels.index_select(0, index)};
}

} // namespace baton::model
