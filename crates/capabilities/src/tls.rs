//! TLS for the host's HTTP clients (S3, the CLI): rustls with `ring`, one
//! crypto library in the build, installed once as the process's provider
//! before any client is built (reqwest refuses to build one without it).

/// Installs the provider; later calls, and a provider already installed,
/// change nothing.
pub fn install_crypto_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
