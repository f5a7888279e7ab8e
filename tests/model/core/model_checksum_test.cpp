// Model files carry a checksum (issue 21, item 7): 4 KiB of random bytes
// written into the middle of a pretrained backbone loaded, trained to NaN
// and the run exited 0. Now the load is refused naming the file and both
// digests; files without a checksum (older baton) still load, and Python's
// torch.jit.load still reads the file (skipped without a python3 with torch).

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/core/checkpoint.hpp"
#include "model/core/error.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/tiny_model.hpp"

namespace fs = std::filesystem;
using baton::testing::scratch_dir;
using namespace baton::model;
using baton::model::testing::spec_of;

namespace {

/// Overwrites `bytes` bytes in the middle of `path` with seeded random bytes.
void corrupt_middle(const std::string& path, size_t bytes) {
  const auto size = fs::file_size(path);
  std::fstream file{path, std::ios::binary | std::ios::in | std::ios::out};
  file.seekp(static_cast<std::streamoff>(size / 2 - bytes / 2));
  std::mt19937 random{7};
  for (size_t i = 0; i < bytes; ++i)
    file.put(static_cast<char>(random() & 0xff));
}

class model_checksum : public ::testing::Test {
protected:
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  scratch_dir scratch_{"model-checksum"};
  const std::string dir_ = scratch_.path();
};

} // namespace

TEST_F(model_checksum, a_file_corrupted_in_the_middle_is_refused) {
  save_checkpoint(make_model(spec_of("convnet", 1)), path("backbone.pt"));
  corrupt_middle(path("backbone.pt"), 4096);
  auto m = make_model(spec_of("convnet", 2));
  const auto before = weights_digest(m);
  try {
    load_checkpoint(m, path("backbone.pt"));
    ADD_FAILURE() << "a corrupt model file loaded";
  } catch (const file_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path("backbone.pt")), std::string::npos) << what;
    // The random bytes land in tensor data (a checksum mismatch naming both
    // digests) or, on another layout, in the archive's structure.
    EXPECT_TRUE(what.find("corrupt model file") != std::string::npos ||
                what.find("not a readable checkpoint") != std::string::npos)
      << what;
  }
  EXPECT_EQ(weights_digest(m), before);
}

TEST_F(model_checksum, a_changed_tensor_byte_is_refused_with_both_digests) {
  auto saved = make_model(spec_of("convnet", 1));
  save_checkpoint(saved, path("m.pt"));
  // Find the bytes of the first weight and flip one of them: only the
  // checksum can tell (LibTorch does not check the zip's CRCs).
  std::ifstream in{path("m.pt"), std::ios::binary};
  std::string bytes{std::istreambuf_iterator<char>(in), {}};
  auto w = saved.named_parameters().front().second.contiguous();
  std::string data(static_cast<const char*>(w.data_ptr()), 64);
  auto at = bytes.find(data);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] = static_cast<char>(bytes[at + 3] ^ 0x40);
  std::ofstream(path("m.pt"), std::ios::binary | std::ios::trunc) << bytes;
  auto m = make_model(spec_of("convnet", 2));
  try {
    load_checkpoint(m, path("m.pt"));
    ADD_FAILURE() << "a corrupt model file loaded";
  } catch (const file_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path("m.pt") + ": corrupt model file"), std::string::npos) << what;
    EXPECT_NE(what.find("SHA-256"), std::string::npos) << what;
  }
}

TEST_F(model_checksum, a_file_without_a_checksum_still_loads) {
  // What save_checkpoint wrote before model files had a checksum.
  auto saved = make_model(spec_of("convnet", 1));
  torch::serialize::OutputArchive archive;
  for (const auto& p : saved.named_state())
    archive.write(p.first, p.second.detach());
  archive.save_to(path("old.pt"));
  auto m = make_model(spec_of("convnet", 2));
  load_checkpoint(m, path("old.pt"));
  EXPECT_EQ(weights_digest(m), weights_digest(saved));
}

TEST_F(model_checksum, python_torch_still_loads_the_file) {
  auto saved = make_model(spec_of("convnet", 1));
  save_checkpoint(saved, path("m.pt"));
  const auto first = saved.named_parameters().front();
  const std::string script = path("load.py");
  std::ofstream(script) << "import sys\n"
                           "try:\n    import torch\nexcept ImportError:\n    sys.exit(3)\n"
                           "m = torch.jit.load(sys.argv[1])\n"
                           "extra = {'baton.sha256': ''}\n"
                           "torch.jit.load(sys.argv[1], _extra_files=extra)\n"
                           "t = dict(m.named_parameters())[sys.argv[2]]\n"
                           "print(len(extra['baton.sha256'].strip()), '%.6f' % t.sum().item())\n";
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    const std::string command = std::string(python) + " " + script + " " + path("m.pt") + " " +
                                first.first + " 2>" + path("log");
    FILE* pipe = ::popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char line[256] = {};
    const bool got = std::fgets(line, sizeof line, pipe) != nullptr;
    const int status = ::pclose(pipe);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 3 || code == 127)
      continue; // no torch in this interpreter, or no such interpreter
    ASSERT_EQ(code, 0) << command << " failed, see " << path("log");
    ASSERT_TRUE(got);
    int digits = 0;
    double sum = 0;
    ASSERT_EQ(std::sscanf(line, "%d %lf", &digits, &sum), 2) << line;
    EXPECT_EQ(digits, 64) << "the checksum as an extra file";
    EXPECT_NEAR(sum, first.second.sum().item<double>(), 1e-4) << line;
    return;
  }
  GTEST_SKIP() << "no python3 that can import torch (install python3-torch)";
}
