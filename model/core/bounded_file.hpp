#pragma once

// A small file read whole, with a bound: config files, run and epoch
// records, profiles and a report's inputs, each refused with the words
// that say why before it costs more than its bound.

#include <cstddef>
#include <string>

namespace baton::model {

/// Reads the whole regular file `path` into `out`. Returns "" on success,
/// else why not ("No such file or directory", "not a regular file (a
/// character device)", "262145 bytes, more than the 262144 (256 KiB) a
/// config file may have", where `kind` names the file: "a config file").
/// A device, FIFO, socket or directory is refused before any byte is read,
/// on the file opened: /dev/zero never ends and a FIFO may never write. At
/// most `max_bytes` + 1 bytes are read, even from a file that grows
/// meanwhile.
std::string read_bounded_file(const std::string& path, std::string& out, size_t max_bytes,
                              const std::string& kind);

} // namespace baton::model
