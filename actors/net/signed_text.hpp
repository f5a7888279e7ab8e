#pragma once

// A line of text signed with a baton certificate's key, checked against the
// cluster CA: how a rank of `baton launch --tls-dir` proves at the rendezvous
// that it holds the certificate of the node it registers (rendezvous.hpp).
// The token carries the certificate and the signature, both base64, so that
// it fits in one line of text:
//
//   token = base64(PEM certificate) "." base64(signature of the text)
//
// The signer signs the text with SHA-256 (EC and RSA keys; Ed25519 and Ed448
// sign the text itself); the checker verifies the certificate's chain to the
// CA, that it is issued to the expected name, and the signature.

#include <string>

#include <caf/expected.hpp>
#include <openssl/types.h>

namespace baton::actors {
inline namespace net {

/// `text` signed with the private key in `key_path`, with the certificate
/// in `certificate_path`: the token. errc::bad_file naming a file that
/// cannot be read.
caf::expected<std::string> sign_text(const std::string& text, const std::string& certificate_path,
                                     const std::string& key_path);

/// Checks `token` (sign_text's) for `text`: its certificate chains to `ca`,
/// is valid now and is issued to `name` (certificate_names), and its key
/// signed `text`. "" when all hold, else what does not.
std::string check_signed_text(const std::string& token, const std::string& text,
                              const std::string& name, X509* ca);

/// 16 random bytes as 32 hex digits (OpenSSL's generator): a challenge
/// that makes each signature good for one connection only.
std::string random_challenge();

} // namespace net
} // namespace baton::actors
