#include "actors/net/tls.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "actors/net/certs.hpp"
#include "actors/net/framed_transport.hpp"
#include "messages/errc.hpp"

namespace baton::actors {
inline namespace net {

namespace {

/// Peers send a certificate and a signature; anything larger is not one.
constexpr size_t max_certificate_bytes = 64 * 1024;
constexpr size_t max_signature_bytes = 1024;

struct md_ctx_deleter {
  void operator()(EVP_MD_CTX* x) const { EVP_MD_CTX_free(x); }
};
using md_ctx_ptr = std::unique_ptr<EVP_MD_CTX, md_ctx_deleter>;

/// What a side signs: a label naming the protocol, the side, the nonce.
std::string proof_message(const std::string& side, const std::string& nonce) {
  return "baton-identity-proof-v1\n" + side + "\n" + nonce;
}

caf::expected<std::string> read_text(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream text;
  if (!(in && text << in.rdbuf()))
    return make_error(errc::bad_file, "cannot read '" + path + "'");
  return text.str();
}

caf::expected<std::string> sign(EVP_PKEY* key, const std::string& message) {
  md_ctx_ptr ctx{EVP_MD_CTX_new()};
  size_t size = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1)
    return make_error(errc::bad_file, "cannot sign: " + openssl_errors());
  std::string signature(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                     reinterpret_cast<const unsigned char*>(message.data()),
                     message.size()) != 1)
    return make_error(errc::bad_file, "cannot sign: " + openssl_errors());
  signature.resize(size);
  return signature;
}

bool signature_valid(EVP_PKEY* key, const std::string& message, const std::string& signature) {
  md_ctx_ptr ctx{EVP_MD_CTX_new()};
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                          message.size()) == 1;
}

bool has_name(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string address(const std::string& name, const std::string& host, uint16_t port) {
  return "node '" + name + "' at " + host + ":" + std::to_string(port);
}

caf::error unreachable(const std::string& what) {
  return make_error(errc::node_unreachable, what);
}

/// Steps 1 and 2 of the proof: the node proves it holds the key of a
/// certificate issued to `expected_name`. Returns the node's nonce.
caf::expected<std::string> authenticate_node(caf::scoped_actor& self, const caf::actor& spawner,
                                             const std::string& where,
                                             const std::string& expected_name,
                                             const tls_settings& tls,
                                             std::chrono::milliseconds timeout) {
  auto nonce = make_nonce();
  caf::expected<std::string> node_nonce = unreachable(where + ": no answer to the TLS proof");
  self->request(spawner, timeout, auth_atom::value, nonce)
    .receive(
      [&](std::string& theirs, std::string& certificate_pem, std::string& signature) {
        auto names = check_proof(tls.ca, {certificate_pem, signature}, "node", nonce);
        if (!names)
          node_nonce = unreachable(where + ": its identity proof failed: " +
                                   describe(names.error()));
        else if (!has_name(*names, expected_name))
          node_nonce = unreachable(where + " presented a certificate for " +
                                   describe_names(*names) + ", but the topology expects '" +
                                   expected_name + "' (a certificate's names are its "
                                   "subjectAltName DNS entries, its CN only when it has "
                                   "none); refusing to use it");
        else
          node_nonce = std::move(theirs);
      },
      [&](caf::error& err) {
        node_nonce = unreachable(where + " did not answer the TLS identity proof: " +
                                 describe(err));
      });
  return node_nonce;
}

/// Steps 3 and 4: this process proves its identity; the node checks it
/// against its tls.allow list.
caf::error authenticate_self(caf::scoped_actor& self, const caf::actor& spawner,
                             const std::string& where, const tls_settings& tls,
                             const std::string& node_nonce, std::chrono::milliseconds timeout) {
  auto proof = prove_identity(tls, "client", node_nonce);
  if (!proof)
    return proof.error();
  caf::error failure;
  self->request(spawner, timeout, auth_atom::value, proof->certificate_pem, proof->signature)
    .receive([](caf::ok_atom) {},
             [&](caf::error& err) {
               failure = unreachable(where + " refused this process's certificate: " +
                                     describe(err));
             });
  return failure;
}

} // namespace

caf::error check_tls_files(const tls_settings& s) {
  std::string missing;
  for (auto [value, name] : {std::pair{&s.certificate, "certificate"}, {&s.key, "key"},
                             {&s.ca, "ca"}})
    if (value->empty())
      missing += (missing.empty() ? "" : ", ") + std::string{name};
  if (!missing.empty())
    return make_error(errc::bad_config,
                      "TLS needs a certificate, its key and the CA; missing: " + missing);
  auto cert = read_certificate(s.certificate);
  if (!cert)
    return cert.error();
  auto key = read_private_key(s.key);
  if (!key)
    return key.error();
  auto ca = read_certificate(s.ca);
  if (!ca)
    return ca.error();
  if (X509_check_private_key(cert->get(), key->get()) != 1)
    return make_error(errc::bad_file,
                      "'" + s.key + "' is not the key of the certificate '" + s.certificate + "'");
  if (auto reason = verify_against(cert->get(), ca->get()); !reason.empty())
    return make_error(errc::bad_file, "the certificate '" + s.certificate +
                                        "' is not valid for the CA '" + s.ca + "': " + reason);
  return caf::none;
}

std::string make_nonce() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    throw std::runtime_error("OpenSSL has no randomness: " + openssl_errors());
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (auto b : bytes)
    out += {hex[b >> 4], hex[b & 15]};
  return out;
}

caf::expected<identity_proof> prove_identity(const tls_settings& own, const std::string& side,
                                             const std::string& peer_nonce) {
  auto pem = read_text(own.certificate);
  if (!pem)
    return pem.error();
  auto key = read_private_key(own.key);
  if (!key)
    return key.error();
  auto signature = sign(key->get(), proof_message(side, peer_nonce));
  if (!signature)
    return signature.error();
  return identity_proof{std::move(*pem), std::move(*signature)};
}

caf::expected<std::vector<std::string>> check_proof(const std::string& ca_file,
                                                    const identity_proof& proof,
                                                    const std::string& side,
                                                    const std::string& own_nonce) {
  if (proof.certificate_pem.size() > max_certificate_bytes ||
      proof.signature.size() > max_signature_bytes)
    return make_error(errc::malformed_message, "identity proof too large");
  auto cert = parse_certificate(proof.certificate_pem);
  if (!cert)
    return cert.error();
  auto ca = read_certificate(ca_file);
  if (!ca)
    return ca.error();
  auto names = certificate_names(cert->get());
  if (auto reason = verify_against(cert->get(), ca->get()); !reason.empty())
    return make_error(errc::bad_file, "the certificate for " + describe_names(names) +
                                        " is not valid for the CA '" + ca_file + "': " + reason);
  if (!signature_valid(X509_get0_pubkey(cert->get()), proof_message(side, own_nonce),
                       proof.signature))
    return make_error(errc::bad_file, "the signature does not match the certificate for " +
                                        describe_names(names));
  return names;
}

std::string describe_names(const std::vector<std::string>& names) {
  if (names.empty())
    return "no name";
  std::string out;
  for (const auto& name : names)
    out += (out.empty() ? "'" : ", '") + name + "'";
  return out;
}

caf::expected<caf::actor> connect_node(caf::actor_system& sys, const std::string& host,
                                       uint16_t port, const std::string& expected_name,
                                       const tls_settings& tls,
                                       std::chrono::milliseconds timeout) {
  auto where = address(expected_name, host, port);
  if (!tls.enabled()) {
    // Without TLS anyone may connect: through the transport that refuses
    // oversized BASP frames (framed_transport.hpp).
    auto spawner = remote_actor_framed(sys, host, port);
    if (!spawner && spawner.error() == caf::sec::disconnect_during_handshake)
      return unreachable(where + " closed the connection during the handshake (if it uses TLS, "
                                 "give this run runtime.tls or --tls-cert, --tls-key, --tls-ca): " +
                         sys.render(spawner.error()));
    return spawner;
  }
  auto spawner = caf::openssl::remote_actor(sys, host, port);
  if (!spawner)
    return unreachable("TLS connection to " + where + " failed (does the node use TLS with a "
                       "certificate of this run's CA, and is this run's certificate from the "
                       "node's CA?): " + sys.render(spawner.error()));
  caf::scoped_actor self{sys};
  auto node_nonce = authenticate_node(self, *spawner, where, expected_name, tls, timeout);
  if (!node_nonce)
    return node_nonce.error();
  if (auto err = authenticate_self(self, *spawner, where, tls, *node_nonce, timeout))
    return err;
  return spawner;
}

} // namespace net
} // namespace baton::actors
