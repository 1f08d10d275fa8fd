//! TLS for tests: a self-signed certificate for `localhost`, the server side that presents it,
//! and a client configuration that trusts it alone (production's, the webpki roots, refuses it:
//! what the tests of `wss://` check both ways).

use std::sync::Arc;

/// A self-signed `localhost` certificate's two sides.
#[derive(Clone)]
pub struct LocalhostTls {
    /// Accepts TLS connections presenting the certificate.
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// A client configuration whose only root is the certificate.
    pub client: Arc<rustls::ClientConfig>,
}

impl LocalhostTls {
    /// A fresh certificate (ring's provider, the safe default protocol versions).
    ///
    /// # Panics
    ///
    /// If the certificate or either configuration cannot be made (a broken test environment).
    pub fn new() -> LocalhostTls {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
        let cert = certified.cert.der().clone();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .expect("server config");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).expect("root");
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        LocalhostTls { acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)), client: Arc::new(client) }
    }
}

impl Default for LocalhostTls {
    fn default() -> LocalhostTls {
        LocalhostTls::new()
    }
}
