// An image folder: DIR/train/<class>/*.png|*.jpg|*.jpeg and DIR/test/<class>/...,
// decoded by stb_image and resized by stb_image_resize (Debian's libstb-dev).

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#include <torch/torch.h>

#include "model/core/data_file.hpp"
#include "model/core/datasets/readers.hpp"
#include "model/core/error.hpp"

namespace baton::model::datasets {

namespace fs = std::filesystem;

namespace {

/// One image file and its class.
struct image_file {
  std::string path;
  int64_t label = 0;
};

bool is_image(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

std::string split_dir(const data_spec& spec, split which) {
  return spec.path + "/" + split_name(which);
}

/// The entries of `dir` (in the data roots): its folders or its images.
std::vector<std::string> sorted_entries(const data_spec& spec, const std::string& dir,
                                        bool directories) {
  check_data_dir(dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw file_error(dir + ": not a directory (expected one sub-folder per class of PNG or JPEG "
                     "files)");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (directories ? entry.is_directory() : entry.is_regular_file() && is_image(entry.path()))
      names.push_back(entry.path().filename().string());
  if (ec)
    throw file_error(dir + ": cannot list: " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

/// The split's images, class by class in turn (the first of every class,
/// then the second, ...), so that a limit keeps every class.
std::vector<image_file> list_images(const data_spec& spec, split which) {
  const auto classes = image_folder_classes(spec);
  const std::string dir = split_dir(spec, which);
  const auto present = sorted_entries(spec, dir, true);
  for (const auto& name : present)
    if (!std::binary_search(classes.begin(), classes.end(), name))
      throw file_error(dir + "/" + name + ": a class folder the training split does not have");
  std::vector<std::vector<std::string>> per_class;
  for (const auto& name : classes) {
    if (!std::binary_search(present.begin(), present.end(), name))
      throw file_error(dir + "/" + name + ": missing class folder (the training split has it)");
    per_class.push_back(sorted_entries(spec, dir + "/" + name, false));
    if (per_class.back().empty())
      throw file_error(dir + "/" + name + ": no PNG or JPEG files in this class folder");
  }
  std::vector<image_file> out;
  for (size_t i = 0, added = 1; added > 0; ++i) {
    added = 0;
    for (size_t k = 0; k < per_class.size(); ++k)
      if (i < per_class[k].size()) {
        out.push_back({dir + "/" + classes[k] + "/" + per_class[k][i], static_cast<int64_t>(k)});
        ++added;
      }
  }
  return out;
}

struct stb_free {
  void operator()(unsigned char* p) const { stbi_image_free(p); }
};

struct file_closer {
  void operator()(FILE* f) const { std::fclose(f); }
};

/// An image file open for stb_image: through data_file (in the data
/// roots, a regular file).
std::unique_ptr<FILE, file_closer> open_image(const std::string& path) {
  data_file file(path, "a PNG or JPEG image");
  const int fd = file.release();
  std::unique_ptr<FILE, file_closer> f{::fdopen(fd, "rb")};
  if (!f) {
    ::close(fd);
    throw file_error(path + ": cannot open: " + std::strerror(errno));
  }
  return f;
}

/// The most one image may take decoded, in MiB (and at most data.memory_mb):
/// a small PNG can declare 20000 x 20000 pixels, gigabytes once decoded.
constexpr double max_image_mib = 256;

/// The size its header declares (`w` x `h` of `channels` bytes), checked
/// before decoding: its decoded bytes must fit the per-image cap and the
/// data's memory budget.
void check_image_size(const data_spec& spec, const std::string& path, int w, int h,
                      int channels) {
  const double mib = static_cast<double>(w) * h * channels / (1 << 20);
  const double budget = spec.memory_mb > 0 ? spec.memory_mb : default_memory_mb();
  if (mib <= std::min(max_image_mib, budget))
    return;
  const auto whole = [](double x) { return std::to_string(static_cast<int64_t>(std::ceil(x))); };
  throw file_error(path + ": a " + std::to_string(w) + "x" + std::to_string(h) + " image of " +
                   std::to_string(channels) + " channels takes " + whole(mib) +
                   " MiB decoded, more than " +
                   (budget < max_image_mib ? "data.memory_mb = " + whole(budget) + " MiB"
                                           : "the " + whole(max_image_mib) +
                                               " MiB one image may take") +
                   " (scale it down)");
}

/// The [C, H, W] of the first training image, when the spec gives no shape.
std::vector<int64_t> first_image_shape(const data_spec& spec) {
  const auto files = list_images(spec, split::train);
  const auto& path = files.front().path;
  int w = 0, h = 0, c = 0;
  if (!stbi_info_from_file(open_image(path).get(), &w, &h, &c))
    throw file_error(path + ": cannot decode: " + stbi_failure_reason());
  check_image_size(spec, path, w, h, c);
  return {c, h, w};
}

/// Decodes `file` to `shape` (channels converted by stb_image; resized when
/// `resize`, else its size must be the shape's) into `out` (C x H x W).
void decode(const data_spec& spec, const std::string& file, const std::vector<int64_t>& shape,
            bool resize, uint8_t* out) {
  const int channels = static_cast<int>(shape[0]);
  auto in = open_image(file);
  int w = 0, h = 0, original = 0;
  if (!stbi_info_from_file(in.get(), &w, &h, &original))
    throw file_error(file + ": cannot decode: " + stbi_failure_reason() +
                     " (expected a PNG or JPEG image)");
  check_image_size(spec, file, w, h, std::max(original, channels));
  std::unique_ptr<unsigned char, stb_free> pixels{
    stbi_load_from_file(in.get(), &w, &h, &original, channels)};
  if (!pixels)
    throw file_error(file + ": cannot decode: " + stbi_failure_reason() +
                     " (expected a PNG or JPEG image)");
  const int out_h = static_cast<int>(shape[1]), out_w = static_cast<int>(shape[2]);
  std::vector<unsigned char> resized;
  const unsigned char* hwc = pixels.get();
  if (w != out_w || h != out_h) {
    if (!resize)
      throw file_error(file + ": is " + std::to_string(w) + "x" + std::to_string(h) +
                       ", expected " + std::to_string(out_w) + "x" + std::to_string(out_h) +
                       " as the first image (give data.shape: [C, H, W] to resize every image)");
    resized.resize(static_cast<size_t>(out_w) * out_h * channels);
    if (!stbir_resize_uint8(pixels.get(), w, h, 0, resized.data(), out_w, out_h, 0, channels))
      throw file_error(file + ": cannot resize to " + std::to_string(out_w) + "x" +
                       std::to_string(out_h));
    hwc = resized.data();
  }
  const int64_t plane = int64_t{out_h} * out_w;
  for (int64_t p = 0; p < plane; ++p)
    for (int c = 0; c < channels; ++c)
      out[c * plane + p] = hwc[p * channels + c];
}

} // namespace

std::vector<std::string> image_folder_classes(const data_spec& spec) {
  auto classes = sorted_entries(spec, split_dir(spec, split::train), true);
  if (classes.empty())
    throw file_error(split_dir(spec, split::train) + ": no class folders (expected one "
                     "sub-folder per class of PNG or JPEG files)");
  return classes;
}

split_header image_folder_header(const data_spec& spec, split which) {
  split_header h;
  h.shape = spec.shape.empty() ? first_image_shape(spec) : spec.shape;
  h.samples = static_cast<int64_t>(list_images(spec, which).size());
  check_sample_count(h.samples, h.shape, split_dir(spec, which));
  return h;
}

raw_split read_image_folder(const data_spec& spec, split which, int64_t count) {
  const bool resize = !spec.shape.empty();
  const auto shape = resize ? spec.shape : first_image_shape(spec);
  if (shape[0] < 1 || shape[0] > 4)
    throw file_error(split_dir(spec, which) + ": images of " + std::to_string(shape[0]) +
                     " channels, expected 1 to 4");
  auto files = list_images(spec, which);
  count = std::min<int64_t>(count, static_cast<int64_t>(files.size()));
  check_sample_count(count, shape, split_dir(spec, which));
  raw_split out;
  out.samples = torch::empty({count, shape[0], shape[1], shape[2]}, torch::kUInt8);
  out.labels = torch::empty({count}, torch::kInt64);
  const int64_t per_sample = shape[0] * shape[1] * shape[2];
  for (int64_t i = 0; i < count; ++i) {
    decode(spec, files[static_cast<size_t>(i)].path, shape, resize,
           out.samples.data_ptr<uint8_t>() + i * per_sample);
    out.labels.data_ptr<int64_t>()[i] = files[static_cast<size_t>(i)].label;
  }
  check_labels(out.labels, data_classes(spec), split_dir(spec, which));
  return out;
}

} // namespace baton::model::datasets
