//! The rustls client configuration of our own protocol client, from the
//! files librdkafka's `ssl.*` settings name.

use super::SettingProblem;
use std::sync::Arc;
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::{
    self, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

pub(super) struct TlsFiles<'a> {
    pub ca: Option<&'a str>,
    pub certificate: Option<&'a str>,
    pub key: Option<&'a str>,
    pub key_password: Option<&'a str>,
    /// `https` or `none`.
    pub identification: &'a str,
}

pub(super) fn client_config(files: &TlsFiles) -> Result<ClientConfig, Vec<SettingProblem>> {
    let provider = Arc::new(ring::default_provider());
    let mut problems = Vec::new();
    let mut roots = RootCertStore::empty();
    match files.ca {
        Some(path) => match certificates("ssl.ca.location", path) {
            Ok(certs) => {
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    problems.push(SettingProblem::new("ssl.ca.location", format!("{path} holds no CA certificate")));
                }
            }
            Err(problem) => problems.push(problem),
        },
        // As librdkafka's `probe`: the system's CA certificates.
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    let check_names = match files.identification.to_ascii_lowercase().as_str() {
        "https" => true,
        "none" => false,
        other => {
            problems.push(SettingProblem::new(
                "ssl.endpoint.identification.algorithm",
                format!("'{other}' is not https or none"),
            ));
            true
        }
    };
    let client_auth = match (files.certificate, files.key) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            if files.key_password.is_some() {
                problems.push(SettingProblem::new(
                    "ssl.key.password",
                    "the host's own Kafka client (share groups, group admin) reads unencrypted PEM keys only",
                ));
            }
            let chain = certificates("ssl.certificate.location", cert).map_err(|p| problems.push(p)).ok();
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| problems.push(SettingProblem::new("ssl.key.location", format!("cannot read {key}: {e}"))))
                .ok();
            chain.zip(key)
        }
        (Some(_), None) => {
            problems.push(SettingProblem::new("ssl.key.location", "ssl.certificate.location needs its key"));
            None
        }
        (None, Some(_)) => {
            problems.push(SettingProblem::new("ssl.certificate.location", "ssl.key.location needs its certificate"));
            None
        }
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| vec![SettingProblem::new("ssl.ca.location", format!("no usable CA certificate: {e}"))])?;
    let verifier: Arc<dyn ServerCertVerifier> = match check_names {
        true => verifier,
        false => Arc::new(AnyName(verifier)),
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| vec![SettingProblem::new("security.protocol", e.to_string())])?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    match client_auth {
        None => Ok(builder.with_no_client_auth()),
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| vec![SettingProblem::new("ssl.key.location", format!("key and certificate: {e}"))]),
    }
}

fn certificates(key: &str, path: &str) -> Result<Vec<CertificateDer<'static>>, SettingProblem> {
    let read = CertificateDer::pem_file_iter(path).and_then(|certs| certs.collect::<Result<Vec<_>, _>>());
    match read {
        Ok(certs) if certs.is_empty() => Err(SettingProblem::new(key, format!("{path} holds no PEM certificate"))),
        Ok(certs) => Ok(certs),
        Err(e) => Err(SettingProblem::new(key, format!("cannot read {path}: {e}"))),
    }
}

/// `ssl.endpoint.identification.algorithm=none`: the chain is still checked
/// against the CA, only the broker's name is not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
