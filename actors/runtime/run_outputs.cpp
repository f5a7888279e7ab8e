#include "actors/runtime/run_outputs.hpp"

#include <filesystem>

#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::actors {
inline namespace runtime {

namespace fs = std::filesystem;

namespace {

/// Whether `a` and `b` name the same file: the same normalised path (also
/// when neither exists yet), or the same inode (links).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  auto x = fs::weakly_canonical(a, ec);
  auto y = fs::weakly_canonical(b, ec);
  if (!x.empty() && x == y)
    return true;
  return fs::equivalent(a, b, ec) && !ec;
}

caf::error refuse(const output_file& out, const std::string& why) {
  return make_error(errc::bad_file, out.flag + " " + out.path + ": " + why);
}

/// Creates and removes the temporary file the output is written through.
caf::error check_writable(const output_file& out) {
  std::error_code ec;
  if (auto link = model::symlink_refusal(out.path); !link.empty())
    return refuse(out, link);
  auto status = fs::status(out.path, ec);
  if (fs::is_directory(status))
    return refuse(out, "is a directory (name a file)");
  // A device or a pipe would be replaced by the rename that writes it.
  if (fs::exists(status) && !fs::is_regular_file(status))
    return refuse(out, "is not a regular file");
  auto dir = fs::path(out.path).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec))
    return refuse(out, "the directory " + dir.string() + " does not exist");
  // A new temporary file of its own name (never one that is there: a link
  // at OUT.tmp once had the check create the file it pointed to), as the
  // write will; a symbolic link at the output itself is refused.
  if (auto why = model::try_check_writable(out.path); !why.empty())
    return refuse(out, why);
  return caf::none;
}

} // namespace

caf::error check_outputs(const std::vector<output_file>& outputs,
                         const std::vector<std::string>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& out = outputs[i];
    if (out.path.empty())
      continue;
    for (const auto& in : inputs)
      if (!in.empty() && same_file(out.path, in))
        return refuse(out, "is an input of this run (" + in + "); it would be overwritten");
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && same_file(out.path, outputs[j].path))
        return refuse(out, "is also the file of " + outputs[j].flag);
    if (auto err = check_writable(out))
      return err;
  }
  return caf::none;
}

} // namespace runtime
} // namespace baton::actors
