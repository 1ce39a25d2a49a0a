//! Opening a master's client, over TLS for `rediss://` URLs when the `tls` feature is on.
//!
//! TLS uses rustls with the ring provider. The server certificate is checked against the system
//! trust store, or against the PEM root certificates given to the builder (a private CA). A client
//! certificate and its key, when given, are presented to masters that authenticate clients. If the
//! process has not chosen a rustls crypto provider, ring's is installed as the process default.
//! Without the feature, a `rediss://` URL is refused at `build()` with a message that says so.

use redis::{Client, RedisError};

/// A client certificate chain and its private key, both PEM. Its `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ClientIdentity {
    /// The certificate chain, leaf first.
    pub(crate) cert_pem: Vec<u8>,
    /// The private key of the leaf certificate.
    pub(crate) key_pem: Vec<u8>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .field("key_pem", &format_args!("<redacted>"))
            .finish()
    }
}

/// Opens the client for `url`; an `Err(Err(reason))` is a refusal of our own, not redis-rs's.
pub(crate) fn open_client(
    url: &str,
    roots: Option<&[u8]>,
    identity: Option<&ClientIdentity>,
) -> Result<Client, Result<RedisError, String>> {
    let tls = url.starts_with("rediss://");
    #[cfg(feature = "tls")]
    {
        if tls {
            // Ignored if the application installed a provider already.
            let _ = rustls::crypto::ring::default_provider().install_default();
            if roots.is_some() || identity.is_some() {
                let certs = redis::TlsCertificates {
                    client_tls: identity.map(|id| redis::ClientTlsConfig {
                        client_cert: id.cert_pem.clone(),
                        client_key: id.key_pem.clone(),
                    }),
                    root_cert: roots.map(<[u8]>::to_vec),
                };
                return Client::build_with_tls(url, certs).map_err(Ok);
            }
        }
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = (roots, identity);
        if tls {
            return Err(Err(
                "rediss:// (TLS) needs quorlock's `tls` cargo feature".to_owned()
            ));
        }
    }
    Client::open(url).map_err(Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_identity_never_shows_its_key() {
        let id = ClientIdentity {
            cert_pem: b"-----BEGIN CERTIFICATE-----".to_vec(),
            key_pem: b"-----BEGIN PRIVATE KEY----- secret".to_vec(),
        };
        let shown = format!("{id:?}");
        assert!(!shown.contains("secret") && !shown.contains("PRIVATE"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}
