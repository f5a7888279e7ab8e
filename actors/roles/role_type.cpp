#include "actors/roles/role_type.hpp"

#include <algorithm>
#include <filesystem>

#include "messages/errc.hpp"

namespace baton::actors {
inline namespace roles {

namespace {

namespace fs = std::filesystem;

/// Whether `path` (already resolved) lies in `root` (already resolved).
bool lies_in(const fs::path& path, const fs::path& root) {
  auto root_end = std::mismatch(root.begin(), root.end(), path.begin(), path.end()).first;
  // A root spelled with a trailing '/' ends in an empty element.
  return root_end == root.end() || (std::next(root_end) == root.end() && root_end->empty());
}

} // namespace

caf::error check_path(const std::string& path, const std::string& what,
                      const std::vector<std::string>& roots, const std::string& key) {
  if (roots.empty() || path.empty())
    return caf::none;
  std::error_code ec;
  auto resolved = fs::weakly_canonical(path, ec);
  if (!ec)
    for (const auto& root : roots)
      if (lies_in(resolved, fs::weakly_canonical(root, ec)) && !ec)
        return caf::none;
  std::string list;
  for (const auto& root : roots)
    list += (list.empty() ? "" : ", ") + root;
  return make_error(errc::bad_file, what + " '" + path + "' (resolved: '" + resolved.string() +
                                      "') is outside the node's " + key + " (" + list + ")");
}

caf::error check_checkpoint_path(const std::string& path, const std::string& what,
                                 const path_roots& roots) {
  std::vector<std::string> dirs;
  if (!roots.checkpoint_dir.empty())
    dirs.push_back(roots.checkpoint_dir);
  return check_path(path, what, dirs, "checkpoint_dir");
}

const role_type* find_role(const std::vector<role_type>& roles, const std::string& name) {
  for (const auto& r : roles)
    if (r.name == name)
      return &r;
  return nullptr;
}

} // namespace roles
} // namespace baton::actors
