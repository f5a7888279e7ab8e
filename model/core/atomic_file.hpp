#pragma once

// The one way baton writes a file (models, training checkpoints, metrics,
// traces, run records, certificates and keys): all or nothing. The bytes are
// built in memory first, so that nothing but the file system can fail while
// writing (LibTorch's archive writer, given a file that fills up, threw from
// a destructor and the process died of SIGABRT with a temporary file left).

#include <string>
#include <string_view>

#include <sys/types.h>

namespace baton::model {

/// Replaces the file `path` with `bytes`: they go to a new temporary file
/// next to it (`PATH.tmp.<pid>.<n>`, created with `mode` less the umask, so
/// that a key is never readable by others, not even while it is written),
/// which is written completely, fsync'ed and renamed over `path`; the
/// directory is then fsync'ed. A reader sees the old file or the new one.
/// On any failure the temporary file is removed and `path` keeps what it
/// held (or stays absent). Returns "" on success, else a message naming
/// `path`, the step that failed and the cause (strerror), e.g.
/// "cannot write 'm.pt': No space left on device (nothing was changed: the
/// previous 'm.pt' is kept)".
std::string try_replace_file(const std::string& path, std::string_view bytes,
                             mode_t mode = 0644);

/// Whether `path` can be written before the work that produces it is done:
/// makes its directory (as save_checkpoint would), creates a temporary file
/// there and removes it. Returns "" or a message naming `path` and the
/// cause. A disk with room for an empty file passes: it can still fill up.
std::string try_check_writable(const std::string& path);

/// try_replace_file, throwing model::file_error with its message on failure.
void replace_file(const std::string& path, std::string_view bytes, mode_t mode = 0644);

} // namespace baton::model
