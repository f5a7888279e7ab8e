#pragma once

// The certificates of a baton cluster: one cluster CA (`baton certs init`)
// signs one certificate per process (`baton certs issue NAME`), whose CN and
// subjectAltName DNS entry are NAME. Keys are EC P-256, written unencrypted
// with mode 0600; every file is written to a temporary name and renamed, so a
// reader never sees half a key.
//
// Also the few OpenSSL readers that actors/net/tls.cpp shares with this file.

#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <openssl/types.h>

namespace baton::actors {
inline namespace net {

// -- files -------------------------------------------------------------------

/// A certificate and its private key, as written by `baton certs`.
struct certificate_files {
  std::string certificate; ///< PEM certificate
  std::string key;         ///< PEM private key (PKCS#8, unencrypted, mode 0600)
};

/// The files of the cluster CA in `dir`: DIR/ca.pem and DIR/ca.key.
certificate_files ca_files(const std::string& dir);

/// The files of certificate `name` in `dir`: DIR/NAME.pem and DIR/NAME.key.
certificate_files issued_files(const std::string& name, const std::string& dir);

/// `baton certs init DIR`: makes the cluster CA (self-signed, valid 10 years,
/// CN "baton cluster CA") in `dir`, creating `dir` (mode 0700) if needed.
/// Existing CA files are an error unless `force`. Errors are errc::bad_file.
caf::expected<certificate_files> init_cluster_ca(const std::string& dir, bool force = false);

/// `baton certs issue NAME --dir DIR`: a certificate for `name` (CN and
/// subjectAltName DNS:NAME, for TLS servers and clients, valid `days` days)
/// signed by the CA in `dir`. `name` is 1 to 64 of [A-Za-z0-9._-], not
/// starting with '.' or '-', and not "ca". Existing files are an error unless
/// `force`; a missing CA is an error naming `baton certs init`.
caf::expected<certificate_files> issue_certificate(const std::string& name, const std::string& dir,
                                                   bool force = false, int days = 825);

// -- reading (shared with actors/net/tls.cpp) ----------------------------------------

struct x509_deleter {
  void operator()(X509* x) const;
};
struct pkey_deleter {
  void operator()(EVP_PKEY* x) const;
};
/// An owned OpenSSL certificate.
using x509_ptr = std::unique_ptr<X509, x509_deleter>;
/// An owned OpenSSL key.
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_deleter>;

/// The first PEM certificate in file `path`; errc::bad_file naming the file.
caf::expected<x509_ptr> read_certificate(const std::string& path);

/// The first PEM certificate in `pem` (text received from a peer).
caf::expected<x509_ptr> parse_certificate(const std::string& pem);

/// The PEM private key in file `path`. An encrypted key is an error (never a
/// passphrase prompt on the terminal).
caf::expected<pkey_ptr> read_private_key(const std::string& path);

/// The names a certificate is issued to, as RFC 6125 reads them: the DNS
/// entries of its subjectAltName when it has any (its subject CN is then
/// not a name of it, whatever it says), else its subject CN.
std::vector<std::string> certificate_names(X509* cert);

/// Whether `cert` chains to `ca` and is valid now; empty when it does, else
/// OpenSSL's reason ("certificate has expired", "unable to get local issuer
/// certificate", ...).
std::string verify_against(X509* cert, X509* ca);

/// OpenSSL's queued error texts, joined (and the queue cleared).
std::string openssl_errors();

} // namespace net
} // namespace baton::actors
