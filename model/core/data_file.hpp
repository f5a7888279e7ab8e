#pragma once

// Opening a dataset file: the one way every data reader (model/core/datasets)
// opens a file, and the one root check a node applies to every path it is
// given (actors/roles/role_type.hpp's check_path). A path is resolved
// (realpath: every symlink and `..`) and must lie in the process's data
// roots (a node's data_dirs, set once at its start), so a class folder or a
// batch file that is a symlink out of them is refused; and it must be a
// regular file, so a FIFO or a device cannot block a run forever.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace baton::model {

/// `path` resolved and whether it lies in one of `roots`.
struct root_check {
  std::string resolved; ///< std::filesystem::weakly_canonical(path): symlinks and `..` resolved
  bool inside = true;   ///< in one of the roots (each resolved the same way); no roots: true
};

/// Resolves `path` and each of `roots` and says whether the path lies in
/// one of them. No roots: no restriction.
root_check check_roots(const std::string& path, const std::vector<std::string>& roots);

/// Sets where this process reads dataset files: a node's data_dirs, set at
/// its start (actors/runtime/node.cpp) before any reader runs. Empty (the
/// default, `baton run`): anywhere.
void set_data_roots(std::vector<std::string> roots);

/// The roots set_data_roots set.
std::vector<std::string> data_roots();

/// Throws file_error naming `path`, its resolved form and the data roots
/// unless the directory `path` lies in one of them: a listing says what a
/// directory holds.
void check_data_dir(const std::string& path);

/// A dataset file open for reading (its descriptor closed on destruction).
class data_file {
public:
  /// Opens `path`: resolved, in one of the data roots (none: anywhere) and a
  /// regular file (a FIFO is opened without blocking and refused). `expected`
  /// says what the file should be ("a numpy .npy file"). Throws file_error
  /// naming the path otherwise.
  data_file(const std::string& path, const std::string& expected);
  ~data_file();
  data_file(data_file&& other) noexcept;
  data_file(const data_file&) = delete;
  data_file& operator=(const data_file&) = delete;
  data_file& operator=(data_file&&) = delete;

  const std::string& path() const { return path_; } ///< as given: errors name it
  int64_t size() const { return size_; }            ///< in bytes, when opened

  /// Reads exactly `n` bytes at `offset` into `out`; throws file_error
  /// naming the file and `what` on a short read or an error.
  void read_at(int64_t offset, void* out, size_t n, const std::string& what) const;

  /// Hands the descriptor over (to gzdopen, fdopen): the caller closes it.
  int release();

private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

} // namespace baton::model
