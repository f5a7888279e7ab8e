#pragma once

// The one way baton writes a file (models, training checkpoints, metrics,
// traces, run records, certificates and keys): all or nothing. The bytes are
// built in memory first, so that nothing but the file system can fail while
// writing (LibTorch's archive writer, given a file that fills up, threw from
// a destructor and the process died of SIGABRT with a temporary file left).
//
// Never through a symbolic link: a checkpoint or output directory may be
// writable by others, and a link put there (DIR/run.lock -> ~/.bashrc) made
// a run truncate and overwrite the file it points to. Every file baton
// creates is opened with O_NOFOLLOW (open_for_writing) or written through a
// new temporary file renamed over it (try_replace_file), and a symbolic link
// in the file's place is refused with a message naming it. A directory given
// as a symbolic link is followed: only the file's own name must not be one.

#include <string>
#include <string_view>

#include <sys/types.h>

namespace baton::model {

/// Why baton does not write `path`: "" when it is not a symbolic link
/// (absent, a file, ...), else "it is a symbolic link (to 'T'): ...",
/// which a caller prefixes with the file's name.
std::string symlink_refusal(const std::string& path);

/// Why baton does not replace `path` with a file of its own: "" when it is
/// absent or a regular file, else why (symlink_refusal's reason; a
/// directory; a device, FIFO or socket, which a rename would remove),
/// which a caller prefixes with the file's name. try_replace_file and
/// try_check_writable refuse such a path.
std::string replacement_refusal(const std::string& path);

/// Why `path` cannot be created where it is without making a directory: ""
/// when its directory is there (or it names none), else "the directory D
/// does not exist" or "D is not a directory". For outputs a launcher or a
/// run names in a directory of its own, where a missing one is a mistake.
std::string missing_directory(const std::string& path);

/// Whether `a` and `b` name the same file: the same normalised path (also
/// when neither exists yet), or the same inode (links): an output that is
/// an input of the same command is refused by it.
bool same_file(const std::string& a, const std::string& b);

/// Opens `path` for writing (`flags`: O_WRONLY or O_RDWR, with O_CREAT,
/// O_APPEND, ... as wanted; O_NOFOLLOW and O_CLOEXEC are added), creating it
/// with `mode` less the umask: never through a symbolic link, and only a
/// regular file with no other hard link (a FIFO or a device is refused, not
/// waited on). Returns the descriptor, or -1 with `why` set to a message
/// naming `path` and the cause ("cannot write 'P': it is a symbolic link
/// ...", "cannot write 'P': Permission denied").
int open_for_writing(const std::string& path, int flags, mode_t mode, std::string& why);

/// Replaces the file `path` with `bytes`: they go to a new temporary file
/// next to it (`PATH.tmp.<pid>.<n>`, created with `mode` less the umask, so
/// that a key is never readable by others, not even while it is written),
/// which is written completely, fsync'ed and renamed over `path`; the
/// directory is then fsync'ed. A reader sees the old file or the new one.
/// On any failure the temporary file is removed and `path` keeps what it
/// held (or stays absent). A symbolic link, a directory, a device, a FIFO
/// or a socket at `path` is refused (replacement_refusal), not replaced. Returns "" on success, else a message naming
/// `path`, the step that failed and the cause (strerror), e.g.
/// "cannot write 'm.pt': No space left on device (nothing was changed: the
/// previous 'm.pt' is kept)".
std::string try_replace_file(const std::string& path, std::string_view bytes,
                             mode_t mode = 0644);

/// Whether `path` can be written before the work that produces it is done:
/// makes its directory (as save_checkpoint would), creates a temporary file
/// there and removes it; refuses what try_replace_file refuses at `path`. Returns "" or a
/// message naming `path` and the cause. A disk with room for an empty file passes: it can still fill up.
std::string try_check_writable(const std::string& path);

/// try_replace_file, throwing model::file_error with its message on failure.
void replace_file(const std::string& path, std::string_view bytes, mode_t mode = 0644);

} // namespace baton::model
