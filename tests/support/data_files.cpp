#include "tests/support/data_files.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <stb/stb_image_write.h>
#include <zlib.h>

namespace baton::testing {

void write_bytes(const std::string& path, const bytes& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out)
    ADD_FAILURE() << "cannot write " << path;
}

void write_gz(const std::string& path, const bytes& data) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (f == nullptr) {
    ADD_FAILURE() << "cannot write " << path;
    return;
  }
  if (!data.empty() && gzwrite(f, data.data(), static_cast<unsigned>(data.size())) !=
                         static_cast<int>(data.size()))
    ADD_FAILURE() << "cannot write " << path;
  gzclose(f);
}

namespace {

void put_u32(bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<unsigned char>(v >> shift));
}

std::string shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

} // namespace

bytes idx_bytes(const std::vector<uint32_t>& dims, const bytes& values) {
  bytes out;
  put_u32(out, 0x0800 + static_cast<uint32_t>(dims.size()));
  for (uint32_t d : dims)
    put_u32(out, d);
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

bytes npy_bytes_with_header(const std::string& header, const void* data, size_t size) {
  // numpy pads the dict with spaces and ends it with a newline so that the
  // data starts at a multiple of 64 bytes (10 bytes of magic, version, length).
  std::string dict = header;
  while ((10 + dict.size() + 1) % 64 != 0)
    dict += ' ';
  dict += '\n';
  bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(static_cast<unsigned char>(dict.size() & 0xff));
  out.push_back(static_cast<unsigned char>(dict.size() >> 8));
  out.insert(out.end(), dict.begin(), dict.end());
  const auto* p = static_cast<const unsigned char*>(data);
  out.insert(out.end(), p, p + size);
  return out;
}

bytes npy_bytes(const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                size_t size) {
  return npy_bytes_with_header("{'descr': '" + descr + "', 'fortran_order': False, 'shape': " +
                                 shape_tuple(shape) + ", }",
                               data, size);
}

sample_set make_samples(int64_t n, int64_t c, int64_t h, int64_t w, int64_t classes,
                        uint32_t seed) {
  sample_set s;
  s.shape = {n, c, h, w};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-30, 30);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = i % classes;
    s.labels.push_back(label);
    // Brightness from 40 to 215 by class, plus noise: learnable, not trivial.
    const int base = static_cast<int>(40 + 175 * label / std::max<int64_t>(classes - 1, 1));
    for (int64_t k = 0; k < c * h * w; ++k)
      s.pixels.push_back(static_cast<unsigned char>(std::clamp(base + noise(rng), 0, 255)));
  }
  return s;
}

namespace {

/// CIFAR-10 records [label, 3072 pixels] of samples [first, last) of `s`.
bytes cifar_records(const sample_set& s, int64_t first, int64_t last) {
  bytes out;
  const int64_t per = s.sample_bytes();
  for (int64_t i = first; i < last; ++i) {
    out.push_back(static_cast<unsigned char>(s.labels[static_cast<size_t>(i)]));
    out.insert(out.end(), s.pixels.begin() + i * per, s.pixels.begin() + (i + 1) * per);
  }
  return out;
}

} // namespace

void write_cifar10(const std::string& dir, const sample_set& train, const sample_set& test) {
  if (train.shape != std::vector<int64_t>{train.size(), 3, 32, 32} ||
      test.shape != std::vector<int64_t>{test.size(), 3, 32, 32}) {
    ADD_FAILURE() << "CIFAR-10 samples are 3x32x32";
    return;
  }
  const int64_t n = train.size();
  for (int64_t b = 0; b < 5; ++b)
    write_bytes(dir + "/data_batch_" + std::to_string(b + 1) + ".bin",
                cifar_records(train, n * b / 5, n * (b + 1) / 5));
  write_bytes(dir + "/test_batch.bin", cifar_records(test, 0, test.size()));
}

void write_npy_pair(const std::string& x, const std::string& y, const sample_set& s) {
  write_bytes(x, npy_bytes("|u1", s.shape, s.pixels.data(), s.pixels.size()));
  write_bytes(y, npy_bytes("<i8", {s.size()}, s.labels.data(), s.labels.size() * sizeof(int64_t)));
}

void write_image(const std::string& file, int w, int h, const std::vector<unsigned char>& rgb) {
  std::vector<unsigned char> pixels;
  for (int i = 0; i < w * h; ++i)
    pixels.insert(pixels.end(), rgb.begin(), rgb.begin() + 3);
  const bool png = file.size() > 4 && file.substr(file.size() - 4) == ".png";
  const int ok = png ? stbi_write_png(file.c_str(), w, h, 3, pixels.data(), w * 3)
                     : stbi_write_jpg(file.c_str(), w, h, 3, pixels.data(), 95);
  if (ok == 0)
    ADD_FAILURE() << "cannot write " << file;
}

void write_image_folder(const std::string& dir, int classes, int train, int test) {
  for (int k = 0; k < classes; ++k) {
    const auto level = static_cast<unsigned char>(30 + 200 * k / std::max(classes - 1, 1));
    const std::vector<unsigned char> rgb{level, static_cast<unsigned char>(255 - level), level};
    for (const auto& [split, count] : {std::pair{"train", train}, std::pair{"test", test}}) {
      const std::string folder = dir + "/" + split + "/c" + std::to_string(k);
      std::filesystem::create_directories(folder);
      for (int i = 0; i < count; ++i)
        write_image(folder + "/" + std::to_string(i) + (i % 2 == 0 ? ".png" : ".jpg"), 12, 10, rgb);
    }
  }
}

namespace {

/// A PNG chunk: length, type, data, CRC-32 of type and data.
void put_chunk(bytes& out, const char* type, const bytes& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  bytes typed(type, type + 4);
  typed.insert(typed.end(), data.begin(), data.end());
  out.insert(out.end(), typed.begin(), typed.end());
  put_u32(out, static_cast<uint32_t>(crc32(0, typed.data(), static_cast<uInt>(typed.size()))));
}

} // namespace

void write_blank_png(const std::string& file, uint32_t w, uint32_t h) {
  bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  bytes header;
  put_u32(header, w);
  put_u32(header, h);
  header.insert(header.end(), {8, 0, 0, 0, 0}); // 8-bit grey, deflate, no filter, no interlace
  put_chunk(png, "IHDR", header);
  // Each row is its filter byte (0) and w zero bytes: deflated row by row.
  z_stream z{};
  ASSERT_EQ(deflateInit(&z, Z_BEST_SPEED), Z_OK);
  const bytes row(static_cast<size_t>(w) + 1, 0);
  bytes compressed, chunk(1 << 16);
  auto drain = [&](int flush) {
    do {
      z.next_out = chunk.data();
      z.avail_out = static_cast<uInt>(chunk.size());
      deflate(&z, flush);
      compressed.insert(compressed.end(), chunk.data(), z.next_out);
    } while (z.avail_out == 0);
  };
  for (uint32_t y = 0; y < h; ++y) {
    z.next_in = const_cast<unsigned char*>(row.data());
    z.avail_in = static_cast<uInt>(row.size());
    drain(Z_NO_FLUSH);
  }
  drain(Z_FINISH);
  deflateEnd(&z);
  put_chunk(png, "IDAT", compressed);
  put_chunk(png, "IEND", {});
  write_bytes(file, png);
}

} // namespace baton::testing
