//! Opening a master's client, over TLS for `rediss://` URLs when the `tls` feature is on.
//!
//! TLS uses rustls with the ring provider. The server certificate is checked against the system
//! trust store, or against the PEM root certificates given to the builder (a private CA). If the
//! process has not chosen a rustls crypto provider, ring's is installed as the process default.
//! Without the feature, a `rediss://` URL is refused at `build()` with a message that says so.

use redis::{Client, RedisError};

/// Opens the client for `url`; an `Err(Err(reason))` is a refusal of our own, not redis-rs's.
pub(crate) fn open_client(url: &str, roots: Option<&[u8]>) -> Result<Client, Result<RedisError, String>> {
    let tls = url.starts_with("rediss://");
    #[cfg(feature = "tls")]
    {
        if tls {
            // Ignored if the application installed a provider already.
            let _ = rustls::crypto::ring::default_provider().install_default();
            if let Some(pem) = roots {
                let certs = redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.to_vec()),
                };
                return Client::build_with_tls(url, certs).map_err(Ok);
            }
        }
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = roots;
        if tls {
            return Err(Err(
                "rediss:// (TLS) needs quorlock's `tls` cargo feature".to_owned()
            ));
        }
    }
    Client::open(url).map_err(Ok)
}
