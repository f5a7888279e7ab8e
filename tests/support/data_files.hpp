#pragma once

// Dataset files in their real formats, written by the tests that read them:
// IDX (raw or gzip), CIFAR-10/100 binary batches, numpy .npy arrays and
// PNG/JPEG images (stb_image_write, Debian's libstb), from a small labelled
// sample set whose classes a model can learn.

#include <cstdint>
#include <string>
#include <vector>

namespace baton::testing {

using bytes = std::vector<unsigned char>;

/// Writes `data` to `path` as it is; a test failure when it cannot.
void write_bytes(const std::string& path, const bytes& data);
/// Writes `data` to `path` gzip-compressed (what IDX downloads are).
void write_gz(const std::string& path, const bytes& data);

/// An IDX file of unsigned bytes: magic 0x0800 + dims.size(), each
/// dimension big-endian, then `values`.
bytes idx_bytes(const std::vector<uint32_t>& dims, const bytes& values);

/// A numpy .npy file, format version 1.0: the header dict `{'descr': DESCR,
/// 'fortran_order': False, 'shape': (...), }` padded to a multiple of 64
/// bytes as numpy does, then `data` (C order).
bytes npy_bytes(const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                size_t size);
/// The same with the header dict given as it is (for malformed headers).
bytes npy_bytes_with_header(const std::string& header, const void* data, size_t size);

/// `n` labelled uint8 samples [n, c, h, w]: sample i has label i % classes
/// and pixels around a brightness that rises with its label, so that a
/// model learns the classes in an epoch.
struct sample_set {
  std::vector<int64_t> shape; ///< [n, c, h, w]
  bytes pixels;               ///< C order
  std::vector<int64_t> labels;
  int64_t size() const { return shape.empty() ? 0 : shape[0]; }
  int64_t sample_bytes() const { return shape[1] * shape[2] * shape[3]; }
};
sample_set make_samples(int64_t n, int64_t c, int64_t h, int64_t w, int64_t classes,
                        uint32_t seed);

/// A CIFAR-10 binary folder in `dir`: `train` (3x32x32) cut into
/// data_batch_1.bin .. data_batch_5.bin, `test` in test_batch.bin.
void write_cifar10(const std::string& dir, const sample_set& train, const sample_set& test);

/// The .npy pair of `s`: `x` uint8 [n, c, h, w] and `y` int64 [n].
void write_npy_pair(const std::string& x, const std::string& y, const sample_set& s);

/// A `w` x `h` image of one colour (RGB), PNG when `file` ends in .png,
/// else JPEG (quality 95); a test failure when it cannot be written.
void write_image(const std::string& file, int w, int h, const std::vector<unsigned char>& rgb);

/// A grey PNG of `w` x `h` black pixels, compressed as it is written (a
/// 20000 x 20000 one is 1.7 MB on disk and 381 MiB decoded): the
/// image that looks small and is not.
void write_blank_png(const std::string& file, uint32_t w, uint32_t h);

/// An image folder in `dir`: train/<class>/ and test/<class>/ for each of
/// `classes` (named c0, c1, ...; class k a colour from dark to light), with
/// `train` and `test` images of 12x10 pixels a class, PNG and JPEG in turn.
void write_image_folder(const std::string& dir, int classes, int train, int test);

} // namespace baton::testing
