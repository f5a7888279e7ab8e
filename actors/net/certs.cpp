#include "actors/net/certs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "messages/errc.hpp"
#include "model/core/atomic_file.hpp"

namespace baton::actors {
inline namespace net {

namespace {

namespace fs = std::filesystem;

struct bio_deleter {
  void operator()(BIO* x) const { BIO_free(x); }
};
using bio_ptr = std::unique_ptr<BIO, bio_deleter>;

caf::error file_error(const std::string& what) {
  return make_error(errc::bad_file, what);
}

// -- writing --------------------------------------------------------------------

/// Writes `data` to `path` with `mode` (less the umask), all or nothing: a
/// crash or a full disk leaves the old file or the new one, and a key is
/// never readable by others, not even while it is being written.
caf::error write_atomically(const std::string& path, const std::string& data, mode_t mode) {
  if (auto why = model::try_replace_file(path, data, mode); !why.empty())
    return file_error(why);
  return caf::none;
}

/// The PEM text of a certificate or an unencrypted PKCS#8 key.
std::string pem_of(X509* cert, EVP_PKEY* key) {
  bio_ptr bio{BIO_new(BIO_s_mem())};
  if (cert != nullptr)
    PEM_write_bio_X509(bio.get(), cert);
  else
    PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  auto size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

caf::error write_pair(const certificate_files& files, X509* cert, EVP_PKEY* key) {
  if (auto err = write_atomically(files.key, pem_of(nullptr, key), 0600))
    return err;
  auto err = write_atomically(files.certificate, pem_of(cert, nullptr), 0644);
  // A key without its certificate is no pair: remove it, so that a retry
  // (after freeing space) does not find a lone key in the way.
  if (err) {
    ::unlink(files.key.c_str());
    return file_error(context_of(err) + "; the new key " + files.key + " was removed again");
  }
  return caf::none;
}

/// Refuses to replace existing files unless forced.
caf::error check_not_existing(const certificate_files& files, bool force) {
  if (force)
    return caf::none;
  for (const auto& path : {files.certificate, files.key})
    if (fs::exists(path))
      return file_error("'" + path + "' already exists (pass --force to replace it)");
  return caf::none;
}

// -- building -------------------------------------------------------------------

bool add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr)
    return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

/// A certificate for `key` with subject CN `name` and a random 127-bit
/// serial, valid from an hour ago (clock skew between machines) for `days`.
x509_ptr new_certificate(EVP_PKEY* key, const std::string& name, int days) {
  x509_ptr cert{X509_new()};
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial{BN_new(), &BN_free};
  bool ok = cert && serial && X509_set_version(cert.get(), 2) == 1 &&
            BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
            BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr &&
            X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * days) != nullptr &&
            X509_set_pubkey(cert.get(), key) == 1 &&
            X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                                       reinterpret_cast<const unsigned char*>(name.c_str()), -1,
                                       -1, 0) == 1;
  return ok ? std::move(cert) : nullptr;
}

caf::expected<pkey_ptr> new_key() {
  pkey_ptr key{EVP_EC_gen("P-256")};
  if (!key)
    return file_error("cannot generate an EC P-256 key: " + openssl_errors());
  return key;
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "ca" || name[0] == '.' || name[0] == '-')
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  return true;
}

/// The CA's certificate and key from `dir`, checked to belong together.
caf::expected<std::pair<x509_ptr, pkey_ptr>> read_ca(const std::string& dir) {
  auto files = ca_files(dir);
  for (const auto& path : {files.certificate, files.key})
    if (!fs::exists(path))
      return file_error("no cluster CA in '" + dir + "' ('" + path +
                        "' is missing): run `baton certs init " + dir + "` first");
  auto cert = read_certificate(files.certificate);
  if (!cert)
    return cert.error();
  auto key = read_private_key(files.key);
  if (!key)
    return key.error();
  if (X509_check_private_key(cert->get(), key->get()) != 1)
    return file_error("'" + files.key + "' is not the key of '" + files.certificate + "'");
  return std::make_pair(std::move(*cert), std::move(*key));
}

/// Passphrase callback that refuses: an encrypted key fails to load instead
/// of OpenSSL prompting on the terminal of a node process.
int no_passphrase(char*, int, int, void*) {
  return -1;
}

} // namespace

certificate_files ca_files(const std::string& dir) {
  return {(fs::path{dir} / "ca.pem").string(), (fs::path{dir} / "ca.key").string()};
}

certificate_files issued_files(const std::string& name, const std::string& dir) {
  return {(fs::path{dir} / (name + ".pem")).string(), (fs::path{dir} / (name + ".key")).string()};
}

caf::expected<certificate_files> init_cluster_ca(const std::string& dir, bool force) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    if (!fs::create_directories(dir, ec))
      return file_error("cannot create directory '" + dir + "': " + ec.message());
    fs::permissions(dir, fs::perms::owner_all, ec);
  }
  auto files = ca_files(dir);
  if (auto err = check_not_existing(files, force))
    return err;
  auto key = new_key();
  if (!key)
    return key.error();
  auto cert = new_certificate(key->get(), "baton cluster CA", 3650);
  bool ok = cert && X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) == 1 &&
            add_extension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE") &&
            add_extension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign") &&
            add_extension(cert.get(), cert.get(), NID_subject_key_identifier, "hash") &&
            X509_sign(cert.get(), key->get(), EVP_sha256()) > 0;
  if (!ok)
    return file_error("cannot make the CA certificate: " + openssl_errors());
  if (auto err = write_pair(files, cert.get(), key->get()))
    return err;
  return files;
}

caf::expected<certificate_files> issue_certificate(const std::string& name, const std::string& dir,
                                                   bool force, int days) {
  if (!valid_name(name))
    return make_error(errc::bad_config,
                      "certificate name '" + name + "': expected 1 to 64 of A-Z a-z 0-9 . _ - "
                      "(not starting with . or -, and not 'ca')");
  auto ca = read_ca(dir);
  if (!ca)
    return ca.error();
  auto& [ca_cert, ca_key] = *ca;
  auto files = issued_files(name, dir);
  if (auto err = check_not_existing(files, force))
    return err;
  auto key = new_key();
  if (!key)
    return key.error();
  auto cert = new_certificate(key->get(), name, days);
  auto san = "DNS:" + name;
  bool ok = cert &&
            X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get())) == 1 &&
            add_extension(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE") &&
            add_extension(cert.get(), ca_cert.get(), NID_key_usage,
                          "critical,digitalSignature,keyAgreement") &&
            add_extension(cert.get(), ca_cert.get(), NID_ext_key_usage, "serverAuth,clientAuth") &&
            add_extension(cert.get(), ca_cert.get(), NID_subject_alt_name, san.c_str()) &&
            add_extension(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid") &&
            X509_sign(cert.get(), ca_key.get(), EVP_sha256()) > 0;
  if (!ok)
    return file_error("cannot make the certificate of '" + name + "': " + openssl_errors());
  if (auto err = write_pair(files, cert.get(), key->get()))
    return err;
  return files;
}

// -- reading ----------------------------------------------------------------------

void x509_deleter::operator()(X509* x) const {
  X509_free(x);
}

void pkey_deleter::operator()(EVP_PKEY* x) const {
  EVP_PKEY_free(x);
}

caf::expected<x509_ptr> parse_certificate(const std::string& pem) {
  bio_ptr bio{BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))};
  x509_ptr cert{bio ? PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr) : nullptr};
  if (!cert)
    return file_error("not a PEM certificate (" + openssl_errors() + ")");
  return cert;
}

caf::expected<x509_ptr> read_certificate(const std::string& path) {
  bio_ptr bio{BIO_new_file(path.c_str(), "r")};
  if (!bio)
    return file_error("cannot read certificate file '" + path + "': " + std::strerror(errno));
  x509_ptr cert{PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr)};
  if (!cert)
    return file_error("'" + path + "' is not a PEM certificate (" + openssl_errors() + ")");
  return cert;
}

caf::expected<pkey_ptr> read_private_key(const std::string& path) {
  bio_ptr bio{BIO_new_file(path.c_str(), "r")};
  if (!bio)
    return file_error("cannot read key file '" + path + "': " + std::strerror(errno));
  pkey_ptr key{PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr)};
  if (!key)
    return file_error("'" + path + "' is not an unencrypted PEM private key (" +
                      openssl_errors() + ")");
  return key;
}

std::vector<std::string> certificate_names(X509* cert) {
  std::vector<std::string> names;
  auto* sans = static_cast<GENERAL_NAMES*>(
    X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); ++i) {
    const GENERAL_NAME* entry = sk_GENERAL_NAME_value(sans, i);
    if (entry->type != GEN_DNS)
      continue;
    const ASN1_IA5STRING* dns = entry->d.dNSName;
    names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                       static_cast<size_t>(ASN1_STRING_length(dns)));
  }
  GENERAL_NAMES_free(sans);
  // RFC 6125 6.4.4: the CN is only a fallback for a certificate without a
  // DNS name; otherwise a CA that checked only the SAN would vouch for a
  // CN it never looked at.
  char cn[256] = {};
  if (names.empty() &&
      X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn) > 0)
    names.emplace_back(cn);
  return names;
}

std::string verify_against(X509* cert, X509* ca) {
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store{X509_STORE_new(),
                                                                &X509_STORE_free};
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx{X509_STORE_CTX_new(),
                                                                      &X509_STORE_CTX_free};
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr) != 1)
    return "cannot set up verification: " + openssl_errors();
  if (X509_verify_cert(ctx.get()) == 1)
    return {};
  return X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
}

std::string openssl_errors() {
  std::string out;
  while (auto code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    out += (out.empty() ? "" : "; ") + std::string{text};
  }
  return out.empty() ? "no details from OpenSSL" : out;
}

} // namespace net
} // namespace baton::actors
