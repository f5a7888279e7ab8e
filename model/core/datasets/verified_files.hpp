#pragma once
// Whole-file checks passed before, remembered by the file's identity. A
// gzip-compressed IDX file is read to its end even when a limit keeps its
// first samples, so that its CRC-32 covers every byte (idx.cpp): for
// Fashion-MNIST's training images, 47 MB inflated (about 0.3 s of CPU) to
// keep 1,024 samples. Once a file passed, runs that take a prefix of it skip
// the rest while it is unchanged: the same device, inode, size and
// modification and status-change times (any write changes the last; a
// file changed less than 2 s before its check is not remembered, as git's
// index does for racy timestamps). A read of the whole file checks it
// every time. The records are kept in this process and in
// $XDG_CACHE_HOME/baton/verified-files (else ~/.cache/baton/...), one line
// per file; a record that cannot be read or written costs a check, nothing
// else. Internal to model/core.

#include <sys/stat.h>

namespace baton::model::datasets {

/// Whether the file `identity` describes (fstat's) passed its whole-file
/// check before, in this process or an earlier one, and is unchanged since.
bool verified_before(const struct stat& identity);

/// Remembers that the file `identity` describes passed its whole-file check.
void remember_verified(const struct stat& identity);

} // namespace baton::model::datasets
