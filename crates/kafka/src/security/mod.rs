//! How the host's clients reach a secured Kafka cluster: TLS (with client
//! certificates) and SASL PLAIN or SCRAM, under librdkafka's setting names.
//! librdkafka applies these settings itself; our share consumer, which speaks
//! the protocol on `kafka-protocol`, reads them through [`ClientSecurity`]:
//! TLS on rustls ([`tls`]), SASL through SaslHandshake/SaslAuthenticate with
//! [`scram`] for the SCRAM exchange.

pub mod scram;
mod tls;

use spillway_config::{Password, Type};
use std::fmt;
use std::sync::Arc;

/// The security settings, by librdkafka's names: one table for the worker's
/// clients, `consumer.override.*` / `producer.override.*` /
/// `admin.override.*`, and kafka grants.
pub const SECURITY_SETTINGS: &[(&str, Type, &str)] = &[
    ("security.protocol", Type::String, "plaintext, ssl, sasl_plaintext or sasl_ssl."),
    ("sasl.mechanism", Type::String, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."),
    ("sasl.username", Type::String, "The SASL user."),
    ("sasl.password", Type::Password, "The SASL password. Stays in the host."),
    ("ssl.ca.location", Type::String, "The CA certificate(s) that sign the brokers' certificates (a PEM file)."),
    ("ssl.certificate.location", Type::String, "The client's certificate (PEM), for TLS client authentication."),
    ("ssl.key.location", Type::String, "The client's private key (PEM)."),
    ("ssl.key.password", Type::Password, "The private key's password. Stays in the host."),
    (
        "ssl.endpoint.identification.algorithm",
        Type::String,
        "https to check the broker's host name against its certificate, none not to.",
    ),
];

/// True for the settings of [`SECURITY_SETTINGS`] (and librdkafka's plural
/// alias `sasl.mechanisms`).
pub fn is_security_setting(key: &str) -> bool {
    key == "sasl.mechanisms" || SECURITY_SETTINGS.iter().any(|(k, ..)| *k == key)
}

/// Whether a setting's value is a secret, never shown.
pub fn is_secret_setting(key: &str) -> bool {
    secret_settings().any(|k| k == key)
}

/// The settings whose values are secrets: the PASSWORD ones of
/// [`SECURITY_SETTINGS`], and a Java client's `sasl.jaas.config`.
pub fn secret_settings() -> impl Iterator<Item = &'static str> {
    let passwords = SECURITY_SETTINGS.iter().filter(|(_, kind, _)| *kind == Type::Password).map(|(k, ..)| *k);
    passwords.chain(["sasl.jaas.config"])
}

/// What our own protocol client does on each new connection: a TLS handshake
/// when `tls` is set, then SASL when `sasl` is.
#[derive(Clone, Default)]
pub struct ClientSecurity {
    pub tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    pub sasl: Option<SaslCredentials>,
}

impl fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSecurity").field("tls", &self.tls.is_some()).field("sasl", &self.sasl).finish()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

#[derive(Clone, Debug)]
pub struct SaslCredentials {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: Password,
}

/// A setting that is wrong, named by its librdkafka key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingProblem {
    pub key: String,
    pub message: String,
}

impl SettingProblem {
    fn new(key: &str, message: impl Into<String>) -> Self {
        SettingProblem { key: key.to_string(), message: message.into() }
    }
}

impl ClientSecurity {
    /// Reads the security settings among `settings` (librdkafka names; later
    /// pairs win), loading the certificate and key files they name. Other
    /// settings are not looked at.
    pub fn from_settings<'a>(
        settings: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, Vec<SettingProblem>> {
        let mut given = std::collections::BTreeMap::new();
        for (k, v) in settings {
            let key = if k == "sasl.mechanisms" { "sasl.mechanism" } else { k };
            given.insert(key, v);
        }
        let get = |key: &str| given.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        let mut problems = Vec::new();
        let protocol = get("security.protocol").unwrap_or("plaintext").to_ascii_lowercase();
        let (tls, sasl) = match protocol.as_str() {
            "plaintext" => (false, false),
            "ssl" => (true, false),
            "sasl_plaintext" => (false, true),
            "sasl_ssl" => (true, true),
            other => {
                problems.push(SettingProblem::new(
                    "security.protocol",
                    format!("'{other}' is not plaintext, ssl, sasl_plaintext or sasl_ssl"),
                ));
                (false, false)
            }
        };
        let sasl = match sasl {
            false => None,
            true => {
                let mechanism = match get("sasl.mechanism").unwrap_or("PLAIN").to_ascii_uppercase().as_str() {
                    "PLAIN" => Some(Mechanism::Plain),
                    "SCRAM-SHA-256" => Some(Mechanism::ScramSha256),
                    "SCRAM-SHA-512" => Some(Mechanism::ScramSha512),
                    other => {
                        problems.push(SettingProblem::new(
                            "sasl.mechanism",
                            format!("'{other}' is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
                        ));
                        None
                    }
                };
                // A password may be blank-padded on purpose: not trimmed.
                let password = given.get("sasl.password").copied().unwrap_or("");
                let username = get("sasl.username");
                if username.is_none() {
                    problems.push(SettingProblem::new("sasl.username", format!("{protocol} needs a SASL user")));
                }
                if password.is_empty() {
                    problems.push(SettingProblem::new("sasl.password", format!("{protocol} needs a SASL password")));
                }
                match (mechanism, username) {
                    (Some(mechanism), Some(username)) => Some(SaslCredentials {
                        mechanism,
                        username: username.to_string(),
                        password: Password::new(password),
                    }),
                    _ => None,
                }
            }
        };
        let tls = match tls {
            false => {
                for key in ["ssl.ca.location", "ssl.certificate.location", "ssl.key.location"] {
                    if get(key).is_some() {
                        problems.push(SettingProblem::new(key, format!("security.protocol={protocol} uses no TLS")));
                    }
                }
                None
            }
            true => match tls::client_config(&tls::TlsFiles {
                ca: get("ssl.ca.location"),
                certificate: get("ssl.certificate.location"),
                key: get("ssl.key.location"),
                key_password: get("ssl.key.password"),
                identification: get("ssl.endpoint.identification.algorithm").unwrap_or("https"),
            }) {
                Ok(config) => Some(Arc::new(config)),
                Err(mut more) => {
                    problems.append(&mut more);
                    None
                }
            },
        };
        match problems.is_empty() {
            true => Ok(ClientSecurity { tls, sasl }),
            false => Err(problems),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(pairs: &[(&str, &str)]) -> Vec<String> {
        match ClientSecurity::from_settings(pairs.iter().copied()) {
            Ok(_) => vec![],
            Err(problems) => problems.into_iter().map(|p| format!("{}: {}", p.key, p.message)).collect(),
        }
    }

    #[test]
    fn plaintext_is_the_default_and_others_are_checked() {
        let security = ClientSecurity::from_settings([("fetch.min.bytes", "1")]).unwrap();
        assert!(security.tls.is_none() && security.sasl.is_none());
        let scram = ClientSecurity::from_settings([
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanisms", "scram-sha-512"),
            ("sasl.username", "u"),
            ("sasl.password", "p w"),
        ])
        .unwrap();
        let sasl = scram.sasl.unwrap();
        assert_eq!(
            (sasl.mechanism, sasl.username.as_str(), sasl.password.value()),
            (Mechanism::ScramSha512, "u", "p w")
        );
        assert!(!format!("{sasl:?}").contains("p w"), "the password shows in Debug");

        assert_eq!(
            problems(&[("security.protocol", "tls")]),
            ["security.protocol: 'tls' is not plaintext, ssl, sasl_plaintext or sasl_ssl"]
        );
        assert_eq!(
            problems(&[("security.protocol", "sasl_plaintext"), ("sasl.mechanism", "GSSAPI")]),
            [
                "sasl.mechanism: 'GSSAPI' is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                "sasl.username: sasl_plaintext needs a SASL user",
                "sasl.password: sasl_plaintext needs a SASL password",
            ]
        );
        assert_eq!(
            problems(&[("ssl.ca.location", "/ca.pem")]),
            ["ssl.ca.location: security.protocol=plaintext uses no TLS"]
        );
        let missing = problems(&[("security.protocol", "ssl"), ("ssl.ca.location", "/nonexistent/ca.pem")]);
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(missing[0].starts_with("ssl.ca.location: cannot read /nonexistent/ca.pem"), "{missing:?}");
    }
}
