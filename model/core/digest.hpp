#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace baton::model {

/// Incremental SHA-256 (OpenSSL), for weight digests and checkpoint checksums.
class sha256 {
public:
  sha256();
  ~sha256();
  sha256(const sha256&) = delete;
  sha256& operator=(const sha256&) = delete;

  void update(const void* data, size_t bytes);
  /// The digest as 64 lowercase hex digits; the object is then spent.
  std::string hex();

private:
  struct context;
  std::unique_ptr<context> ctx_;
};

/// SHA-256 of `bytes` as hex.
std::string sha256_hex(const std::string& bytes);

} // namespace baton::model
