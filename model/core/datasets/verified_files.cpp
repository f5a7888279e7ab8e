#include "model/core/datasets/verified_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

#include "model/core/cache_dir.hpp"

namespace baton::model::datasets {

namespace {

/// Past this size the file of records starts again (a record is ~60 bytes).
constexpr std::uintmax_t largest_records = 1 << 20;

/// A file changed this recently may still be written: not remembered.
constexpr std::chrono::seconds settled{2};

/// One line of the records: what makes a file's identity.
std::string record_of(const struct stat& s) {
  std::ostringstream out;
  out << s.st_dev << ' ' << s.st_ino << ' ' << s.st_size << ' ' << s.st_mtim.tv_sec << ' '
      << s.st_mtim.tv_nsec << ' ' << s.st_ctim.tv_sec << ' ' << s.st_ctim.tv_nsec;
  return out.str();
}

std::string records_path() {
  const std::string dir = user_cache_dir();
  return dir.empty() ? dir : dir + "/verified-files";
}

std::mutex records_mutex;

/// This process's records, with the file's read once.
std::set<std::string>& known() {
  static std::set<std::string> records = [] {
    std::set<std::string> out;
    const std::string path = records_path();
    std::error_code ignored;
    if (path.empty() || std::filesystem::file_size(path, ignored) > largest_records)
      return out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      out.insert(line);
    return out;
  }();
  return records;
}

} // namespace

bool verified_before(const struct stat& identity) {
  std::lock_guard<std::mutex> lock(records_mutex);
  return known().count(record_of(identity)) > 0;
}

void remember_verified(const struct stat& identity) {
  const auto changed = std::chrono::system_clock::from_time_t(identity.st_ctim.tv_sec);
  if (std::chrono::system_clock::now() - changed < settled)
    return;
  const std::string record = record_of(identity);
  std::lock_guard<std::mutex> lock(records_mutex);
  if (!known().insert(record).second)
    return;
  const std::string path = records_path();
  if (path.empty())
    return;
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
  const bool full = std::filesystem::file_size(path, ignored) > largest_records;
  // One write of one line, appended: runs that record at once do not mix lines.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
                                        (full ? O_TRUNC : 0), 0644);
  if (fd < 0)
    return;
  const std::string line = record + '\n';
  const ssize_t written = ::write(fd, line.data(), line.size());
  (void)written; // not kept: the next run checks the file again
  ::close(fd);
}

} // namespace baton::model::datasets
