#include "model/core/digest.hpp"

#include <openssl/evp.h>

#include "model/core/error.hpp"

namespace baton::model {

struct sha256::context {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~context() { EVP_MD_CTX_free(md); }
};

sha256::sha256() : ctx_(std::make_unique<context>()) {
  if (ctx_->md == nullptr || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1)
    throw error("SHA-256: cannot initialise OpenSSL's digest");
}

sha256::~sha256() = default;

void sha256::update(const void* data, size_t bytes) {
  if (EVP_DigestUpdate(ctx_->md, data, bytes) != 1)
    throw error("SHA-256: update failed");
}

std::string sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx_->md, digest, &length) != 1)
    throw error("SHA-256: final failed");
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 15];
  }
  return out;
}

std::string sha256_hex(const std::string& bytes) {
  sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.hex();
}

} // namespace baton::model
