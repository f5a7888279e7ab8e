// IDX files (Fashion-MNIST, MNIST, KMNIST, EMNIST), gzip-compressed or raw:
// zlib's gzread reads a file without a gzip header as it is.

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <torch/torch.h>
#include <zlib.h>

#include "model/core/data_file.hpp"
#include "model/core/datasets/readers.hpp"
#include "model/core/datasets/verified_files.hpp"
#include "model/core/error.hpp"

namespace baton::model::datasets {

namespace {

// The IDX header: two zero bytes, the element type, the number of
// dimensions, then one big-endian uint32 per dimension.
constexpr unsigned char idx_ubyte = 0x08;
constexpr int64_t fashion_mnist_side = 28;

struct gz_closer {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using gz_file = std::unique_ptr<gzFile_s, gz_closer>;

/// Reads exactly `n` bytes or throws naming the file and what was being read.
void gz_read_exact(gzFile f, const std::string& path, void* out, size_t n, const char* what) {
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
      throw file_error(path + ": truncated: expected " + std::to_string(n) + " bytes of " + what +
                       ", got " + std::to_string(done));
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

/// An IDX file open for reading, and what it was when opened.
struct idx_file {
  gz_file stream;
  struct stat identity {}; ///< fstat's: verified_before and remember_verified take it
  bool identified = false; ///< fstat answered: without it the file is checked whole
};

/// Opens `path` through data_file (in the data roots, a regular file:
/// gzopen would open a directory and read a FIFO without end).
idx_file gz_open(const std::string& path, const data_spec& spec) {
  data_file file(path, "an IDX file");
  const int fd = file.release();
  idx_file out;
  out.identified = ::fstat(fd, &out.identity) == 0;
  errno = 0;
  out.stream.reset(gzdopen(fd, "rb"));
  if (!out.stream) {
    ::close(fd);
    std::string why = errno != 0 ? std::string{": "} + std::strerror(errno) : "";
    throw file_error(path + ": cannot open" + why + " (expected an IDX file)");
  }
  gzbuffer(out.stream.get(), 1 << 18); // fewer, larger reads: an images file is tens of MB
  return out;
}

/// Reads a gzip stream on to its end, discarding `remaining` bytes, so that
/// zlib checks the whole file's CRC-32 and length before a prefix of it is
/// used: a flipped byte past a limit would otherwise go unnoticed while the
/// prefix it corrupts trains. (A raw file has no checksum; its length is
/// checked the same way.) A file that passed before and is unchanged is not
/// read past the prefix again (verified_files.hpp).
void gz_verify_rest(idx_file& f, const std::string& path, size_t remaining, const char* what) {
  if (remaining > 0 && f.identified && verified_before(f.identity))
    return;
  std::vector<unsigned char> scratch(std::min<size_t>(remaining, size_t{1} << 20));
  while (remaining > 0) {
    const size_t chunk = std::min(remaining, scratch.size());
    gz_read_exact(f.stream.get(), path, scratch.data(), chunk, what);
    remaining -= chunk;
  }
  gz_expect_end(f.stream.get(), path);
  if (f.identified)
    remember_verified(f.identity);
}

/// Reads an IDX header of unsigned bytes with `min_dims` to `max_dims`
/// dimensions; returns them.
std::vector<int64_t> read_idx_header(gzFile f, const std::string& path, size_t min_dims,
                                     size_t max_dims) {
  std::array<unsigned char, 4> magic{};
  gz_read_exact(f, path, magic.data(), magic.size(), "the IDX header");
  const size_t dims = magic[3];
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != idx_ubyte || dims < min_dims ||
      dims > max_dims)
    throw file_error(path + ": bad IDX magic number " + std::to_string(big_endian_u32(magic.data())) +
                     ", expected " + std::to_string(0x800 + min_dims) +
                     (max_dims > min_dims ? " to " + std::to_string(0x800 + max_dims) : "") +
                     " (unsigned bytes, " + std::to_string(min_dims) +
                     (max_dims > min_dims ? " or " + std::to_string(max_dims) : "") +
                     " dimensions)");
  std::array<unsigned char, 16> sizes{};
  gz_read_exact(f, path, sizes.data(), 4 * dims, "the IDX header");
  std::vector<int64_t> out;
  for (size_t i = 0; i < dims; ++i)
    out.push_back(big_endian_u32(sizes.data() + 4 * i));
  return out;
}

struct split_paths {
  std::string images, labels;
};

split_paths paths_of(const data_spec& spec, split which) {
  const auto& files = which == split::train ? spec.train : spec.test;
  auto in_dir = [&](const std::string& name) {
    return std::filesystem::path(name).is_absolute() ? name : spec.path + "/" + name;
  };
  return {in_dir(files.x), in_dir(files.y)};
}

/// Reads and checks the images header: [C, H, W] and the count.
split_header read_images_header(gzFile f, const std::string& path, const data_spec& spec) {
  auto dims = read_idx_header(f, path, 3, 4);
  split_header h;
  h.samples = dims[0];
  h.shape = dims.size() == 3 ? std::vector<int64_t>{1, dims[1], dims[2]}
                             : std::vector<int64_t>{dims[1], dims[2], dims[3]};
  if (spec.kind == "fashion-mnist" &&
      (h.shape != std::vector<int64_t>{1, fashion_mnist_side, fashion_mnist_side}))
    throw file_error(path + ": images are " + std::to_string(h.shape[1]) + "x" +
                     std::to_string(h.shape[2]) + ", expected 28x28 (Fashion-MNIST; data.kind: "
                     "idx reads any size)");
  check_sample_count(h.samples, h.shape, path);
  return h;
}

/// Reads and checks the header of a labels file: `total` labels.
void read_labels_header(gzFile f, const std::string& path, int64_t total) {
  auto dims = read_idx_header(f, path, 1, 1);
  if (dims[0] != total)
    throw file_error(path + ": declares " + std::to_string(dims[0]) + " labels, expected " +
                     std::to_string(total) + " (one per image)");
}

} // namespace

split_header idx_header(const data_spec& spec, split which) {
  const auto paths = paths_of(spec, which);
  const split_header h =
    read_images_header(gz_open(paths.images, spec).stream.get(), paths.images, spec);
  read_labels_header(gz_open(paths.labels, spec).stream.get(), paths.labels, h.samples);
  return h;
}

raw_split read_idx(const data_spec& spec, split which, int64_t count) {
  const auto paths = paths_of(spec, which);
  auto images = gz_open(paths.images, spec);
  const split_header h = read_images_header(images.stream.get(), paths.images, spec);
  count = std::min(count, h.samples);
  const auto per_sample = static_cast<size_t>(h.shape[0] * h.shape[1] * h.shape[2]);
  raw_split out;
  out.samples = torch::empty({count, h.shape[0], h.shape[1], h.shape[2]}, torch::kUInt8);
  gz_read_exact(images.stream.get(), paths.images, out.samples.data_ptr(),
                static_cast<size_t>(out.samples.numel()), "the pixels");
  // With a limit the rest is read too (and dropped): the checksum covers it.
  gz_verify_rest(images, paths.images, static_cast<size_t>(h.samples - count) * per_sample,
                 "the pixels");
  auto labels_file = gz_open(paths.labels, spec);
  read_labels_header(labels_file.stream.get(), paths.labels, h.samples);
  auto labels = torch::empty({count}, torch::kUInt8);
  gz_read_exact(labels_file.stream.get(), paths.labels, labels.data_ptr(),
                static_cast<size_t>(count), "the labels");
  gz_verify_rest(labels_file, paths.labels, static_cast<size_t>(h.samples - count),
                 "the labels");
  out.labels = labels.to(torch::kInt64);
  check_labels(out.labels, data_classes(spec), paths.labels);
  return out;
}

} // namespace baton::model::datasets
