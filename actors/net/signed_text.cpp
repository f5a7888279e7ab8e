#include "actors/net/signed_text.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "actors/net/certs.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace net {

namespace {

using md_context = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

/// The digest a key signs with: none for the keys that sign the message
/// itself (Ed25519, Ed448), SHA-256 for the others.
const EVP_MD* digest_for(EVP_PKEY* key) {
  auto id = EVP_PKEY_get_base_id(key);
  return id == EVP_PKEY_ED25519 || id == EVP_PKEY_ED448 ? nullptr : EVP_sha256();
}

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  auto n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                           reinterpret_cast<const unsigned char*>(bytes.data()),
                           static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

/// The bytes of base64 `text`, or nothing when it is not base64.
std::optional<std::string> unbase64(const std::string& text) {
  if (text.empty() || text.size() % 4 != 0)
    return std::nullopt;
  std::string out(3 * text.size() / 4, '\0');
  auto n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                           reinterpret_cast<const unsigned char*>(text.data()),
                           static_cast<int>(text.size()));
  if (n < 0)
    return std::nullopt;
  // EVP_DecodeBlock counts the padding's zero bytes.
  auto padding = static_cast<size_t>(std::count(text.end() - 2, text.end(), '='));
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

std::string read_all(const std::string& path) {
  std::unique_ptr<FILE, decltype(&std::fclose)> file{std::fopen(path.c_str(), "rb"), &std::fclose};
  std::string out;
  if (!file)
    return out;
  char chunk[4096];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, file.get())) > 0 && out.size() < 65536;)
    out.append(chunk, n);
  return out;
}

} // namespace

caf::expected<std::string> sign_text(const std::string& text, const std::string& certificate_path,
                                     const std::string& key_path) {
  auto cert = read_certificate(certificate_path);
  if (!cert)
    return cert.error();
  auto key = read_private_key(key_path);
  if (!key)
    return key.error();
  md_context ctx{EVP_MD_CTX_new(), &EVP_MD_CTX_free};
  size_t size = 0;
  if (!ctx ||
      EVP_DigestSignInit(ctx.get(), nullptr, digest_for(key->get()), nullptr, key->get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &size,
                     reinterpret_cast<const unsigned char*>(text.data()), text.size()) != 1)
    return make_error(errc::bad_file, "cannot sign with the key '" + key_path + "': " +
                                        openssl_errors());
  std::string signature(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                     reinterpret_cast<const unsigned char*>(text.data()), text.size()) != 1)
    return make_error(errc::bad_file, "cannot sign with the key '" + key_path + "': " +
                                        openssl_errors());
  signature.resize(size);
  // The certificate as its file has it (PEM), first certificate only.
  auto pem = read_all(certificate_path);
  auto end = pem.find("-----END CERTIFICATE-----");
  if (end != std::string::npos)
    pem.resize(end + 25);
  return base64(pem) + "." + base64(signature);
}

std::string check_signed_text(const std::string& token, const std::string& text,
                              const std::string& name, X509* ca) {
  auto dot = token.find('.');
  auto pem = unbase64(token.substr(0, dot));
  auto signature = dot == std::string::npos ? std::nullopt : unbase64(token.substr(dot + 1));
  if (!pem || !signature)
    return "no certificate and signature (a registration without --tls-dir, or a garbled one)";
  auto cert = parse_certificate(*pem);
  if (!cert)
    return "its certificate: " + context_of(cert.error());
  if (auto why = verify_against(cert->get(), ca); !why.empty())
    return "its certificate is not the cluster CA's: " + why;
  auto names = certificate_names(cert->get());
  if (std::find(names.begin(), names.end(), name) == names.end())
    return "its certificate is issued to " + (names.empty() ? std::string{"no name"}
                                                            : "'" + names.front() + "'") +
           ", not to its node '" + name + "'";
  EVP_PKEY* key = X509_get0_pubkey(cert->get());
  md_context ctx{EVP_MD_CTX_new(), &EVP_MD_CTX_free};
  bool good = key != nullptr && ctx &&
              EVP_DigestVerifyInit(ctx.get(), nullptr, digest_for(key), nullptr, key) == 1 &&
              EVP_DigestVerify(ctx.get(),
                               reinterpret_cast<const unsigned char*>(signature->data()),
                               signature->size(),
                               reinterpret_cast<const unsigned char*>(text.data()),
                               text.size()) == 1;
  if (!good) {
    openssl_errors(); // clears the queue
    return "its signature does not match its certificate and this connection's challenge";
  }
  return {};
}

std::string random_challenge() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    throw std::runtime_error("OpenSSL has no randomness: " + openssl_errors());
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

} // namespace net
} // namespace baton::actors
