#pragma once

// Mutual TLS between baton processes, and the name check CAF 0.17 leaves out.
//
// caf_openssl verifies that the peer's certificate chains to the trusted CA,
// but never looks at the name in it: any certificate of the cluster CA would
// pass for any node, and a node cannot tell which coordinator it serves.
// Baton adds a proof of identity in both directions, sent over the CAF
// connection itself as soon as it is up and before any spawn request:
//
//   coordinator                                        node (its spawner)
//     (auth_atom, nonce_c)                        ->
//                                                 <-   (nonce_n, node PEM, sig_node(nonce_c))
//     checks: chain to the CA, signature,
//     a name of the certificate == the node's name in the topology
//     (auth_atom, own PEM, sig_client(nonce_n))   ->
//                                                      checks: chain to the CA, signature,
//                                                      a name of the certificate in tls.allow
//                                                 <-   ok_atom
//
// Only then does the spawner serve requests from that peer process (CAF
// node). A signature covers a fixed label, the signer's side and the other
// side's fresh nonce, so it cannot be replayed on another connection or
// reflected back. A certificate's names are its subjectAltName DNS entries,
// or its CN when it has none (RFC 6125: when a DNS name is present, the CN is
// not used); `baton certs issue NAME` sets both to NAME.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/expected.hpp>

namespace baton::actors {
inline namespace net {

/// The proof of identity messages (see above), answered by the spawner.
using auth_atom = caf::atom_constant<caf::atom("auth")>;

/// This process's TLS identity and the CA it trusts (PEM files). TLS is on
/// when any of them is set; then all three are required.
struct tls_settings {
  std::string certificate; ///< this process's certificate
  std::string key;         ///< its private key (unencrypted)
  std::string ca;          ///< the cluster CA's certificate

  bool enabled() const { return !certificate.empty() || !key.empty() || !ca.empty(); }
};

/// Checks what CAF would otherwise abort the process on, before an actor
/// system starts: all three files are given, readable and parse, the key
/// belongs to the certificate, and the certificate chains to the CA and is
/// valid now. Errors (errc::bad_config / bad_file) name the files.
caf::error check_tls_files(const tls_settings& s);

/// What one side sends to prove that it holds the key of its certificate.
struct identity_proof {
  std::string certificate_pem; ///< the side's certificate
  std::string signature;       ///< over proof label, side and the peer's nonce
};

/// A fresh random nonce (32 bytes, hex).
std::string make_nonce();

/// Signs `peer_nonce` as `side` ("node" or "client") with `own.key`.
caf::expected<identity_proof> prove_identity(const tls_settings& own, const std::string& side,
                                             const std::string& peer_nonce);

/// Checks a proof made by `side` over `own_nonce`: the certificate chains to
/// the CA in `ca_file` and the signature is its key's. Returns the
/// certificate's names (certificate_names: its DNS names, else its CN).
caf::expected<std::vector<std::string>> check_proof(const std::string& ca_file,
                                                    const identity_proof& proof,
                                                    const std::string& side,
                                                    const std::string& own_nonce);

/// "'n1'" or "'a', 'b'": certificate names for error messages.
std::string describe_names(const std::vector<std::string>& names);

/// Connects to the spawner of node `expected_name` at host:port. Without TLS,
/// CAF's plain remote_actor. With TLS: caf::openssl::remote_actor, then the
/// proof above; a node whose certificate is not issued to `expected_name`
/// is refused with an error naming the expected and the presented names.
/// Errors are errc::node_unreachable.
caf::expected<caf::actor> connect_node(caf::actor_system& sys, const std::string& host,
                                       uint16_t port, const std::string& expected_name,
                                       const tls_settings& tls,
                                       std::chrono::milliseconds timeout = std::chrono::seconds(10));

} // namespace net
} // namespace baton::actors
