//! What a connector may set on its Kafka clients through
//! `consumer.override.*`, `producer.override.*` and `admin.override.*`, as
//! Connect's `connector.client.config.override.policy` decides it: the
//! worker's `policy.client.overrides` lists the kinds of setting it allows.
//! Tuning is allowed unless the worker says otherwise; where the clients
//! connect, how they authenticate and whether they check certificates need
//! the worker's word, since each reaches past the worker's cluster or spends
//! the worker's credentials; and nothing that makes librdkafka load code or
//! write files is ever allowed.

use std::fmt;

/// A kind of client setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SettingKind {
    /// Batching, timeouts, buffers, `group.id`, `client.id`: the clients'
    /// behaviour against the servers the worker chose.
    Tuning,
    /// `bootstrap.servers` and any other address a client calls.
    Servers,
    /// Protocol, mechanism, trust stores and the files they read.
    Security,
    /// Users, passwords, keys and tokens.
    Credentials,
    /// Turning certificate checks off.
    TlsVerification,
    /// Loads a library, runs a command or writes files: never allowed.
    LoadsCode,
}

impl SettingKind {
    /// The names `policy.client.overrides` takes, in order.
    pub const ALLOWABLE: [SettingKind; 5] = [
        SettingKind::Tuning,
        SettingKind::Servers,
        SettingKind::Security,
        SettingKind::Credentials,
        SettingKind::TlsVerification,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SettingKind::Tuning => "tuning",
            SettingKind::Servers => "servers",
            SettingKind::Security => "security",
            SettingKind::Credentials => "credentials",
            SettingKind::TlsVerification => "tls.verification",
            SettingKind::LoadsCode => "code",
        }
    }

    /// The kind of librdkafka setting `setting`. Unknown `ssl.*`, `sasl.*`
    /// and `https.*` settings count as security, so that a setting added to
    /// librdkafka later is not tuning by default.
    pub fn of(setting: &str) -> SettingKind {
        const LOADS_CODE: &[&str] = &[
            "plugin.library.paths",
            "interceptors",
            "ssl.engine.location",
            "ssl.engine.id",
            "ssl.providers",
            "ssl_engine_callback_data",
            "sasl.kerberos.kinit.cmd",
            "offset.store.method",
            "offset.store.path",
            "internal.termination.signal",
            "opaque",
            "default_topic_conf",
        ];
        const SERVERS: &[&str] = &["bootstrap.servers", "metadata.broker.list", "sasl.oauthbearer.token.endpoint.url"];
        const TLS_VERIFICATION: &[&str] =
            &["enable.ssl.certificate.verification", "ssl.endpoint.identification.algorithm"];
        const CREDENTIALS: &[&str] = &[
            "sasl.username",
            "sasl.password",
            "sasl.jaas.config",
            "sasl.kerberos.keytab",
            "sasl.kerberos.principal",
            "sasl.oauthbearer.config",
            "sasl.oauthbearer.client.id",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.client.credentials.client.id",
            "sasl.oauthbearer.client.credentials.client.secret",
            "sasl.oauthbearer.assertion.file",
            "sasl.oauthbearer.assertion.private.key.file",
            "sasl.oauthbearer.assertion.private.key.passphrase",
            "sasl.oauthbearer.assertion.private.key.pem",
            "ssl.key.location",
            "ssl.key.password",
            "ssl.key.pem",
            "ssl_key",
            "ssl.certificate.location",
            "ssl.certificate.pem",
            "ssl_certificate",
            "ssl.keystore.location",
            "ssl.keystore.password",
        ];
        let setting = setting.trim();
        if LOADS_CODE.contains(&setting) || setting.ends_with("_cb") || setting.ends_with(".cmd") {
            SettingKind::LoadsCode
        } else if SERVERS.contains(&setting) {
            SettingKind::Servers
        } else if TLS_VERIFICATION.contains(&setting) {
            SettingKind::TlsVerification
        } else if CREDENTIALS.contains(&setting) {
            SettingKind::Credentials
        } else if ["ssl", "sasl", "https", "security"]
            .iter()
            .any(|p| setting.strip_prefix(p).is_some_and(|rest| rest.starts_with(['.', '_'])))
            || setting == "enable.sasl.oauthbearer.unsecure.jwt"
        {
            SettingKind::Security
        } else {
            SettingKind::Tuning
        }
    }
}

impl fmt::Display for SettingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `policy.client.overrides`: the kinds of client setting a connector may
/// override.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOverrides {
    allowed: Vec<SettingKind>,
}

impl Default for ClientOverrides {
    /// Tuning only.
    fn default() -> Self {
        ClientOverrides { allowed: vec![SettingKind::Tuning] }
    }
}

impl ClientOverrides {
    /// The worker's list: kind names, or `none` alone.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut allowed = Vec::new();
        for entry in entries.iter().map(|e| e.trim()) {
            if entry == "none" && entries.len() == 1 {
                continue;
            }
            match SettingKind::ALLOWABLE.iter().find(|k| k.name() == entry) {
                Some(kind) => allowed.push(*kind),
                None if entry == SettingKind::LoadsCode.name() => {
                    return Err("code is never allowed: no connector makes the worker load a library or run a \
                                command"
                        .into());
                }
                None => return Err(format!("'{entry}' is not one of {} (or none alone)", Self::names())),
            }
        }
        allowed.sort();
        allowed.dedup();
        Ok(ClientOverrides { allowed })
    }

    fn names() -> String {
        SettingKind::ALLOWABLE.map(SettingKind::name).join(", ")
    }

    /// Why `key` (a connector's override of librdkafka's `setting`) is
    /// refused, if it is.
    pub fn check(&self, key: &str, setting: &str) -> Result<(), String> {
        let kind = SettingKind::of(setting);
        if kind == SettingKind::LoadsCode {
            return Err(format!(
                "{key} is refused: {setting} makes librdkafka load code, run a command or write files in the \
                 worker, which no connector may ask for"
            ));
        }
        if self.allowed.contains(&kind) {
            return Ok(());
        }
        let allowed = match self.allowed.is_empty() {
            true => "none".to_string(),
            false => self.allowed.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
        };
        Err(format!(
            "{key} is refused: {setting} is a {kind} setting, and the worker's policy.client.overrides allows \
             {allowed} (add {kind} there to allow it)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_has_its_kind_and_unknown_security_settings_are_not_tuning() {
        for (setting, kind) in [
            ("linger.ms", SettingKind::Tuning),
            ("group.id", SettingKind::Tuning),
            ("auto.offset.reset", SettingKind::Tuning),
            ("bootstrap.servers", SettingKind::Servers),
            ("sasl.oauthbearer.token.endpoint.url", SettingKind::Servers),
            ("security.protocol", SettingKind::Security),
            ("ssl.ca.location", SettingKind::Security),
            ("ssl.some.future.setting", SettingKind::Security),
            ("https.ca.location", SettingKind::Security),
            ("sasl.password", SettingKind::Credentials),
            ("ssl.key.location", SettingKind::Credentials),
            ("enable.ssl.certificate.verification", SettingKind::TlsVerification),
            ("ssl.endpoint.identification.algorithm", SettingKind::TlsVerification),
            ("plugin.library.paths", SettingKind::LoadsCode),
            ("ssl.engine.location", SettingKind::LoadsCode),
            ("sasl.kerberos.kinit.cmd", SettingKind::LoadsCode),
            ("offset.store.path", SettingKind::LoadsCode),
        ] {
            assert_eq!(SettingKind::of(setting), kind, "{setting}");
        }
    }

    #[test]
    fn tuning_is_the_default_and_code_is_never_allowed() {
        let default = ClientOverrides::default();
        assert!(default.check("consumer.override.fetch.min.bytes", "fetch.min.bytes").is_ok());
        let refused = default.check("consumer.override.bootstrap.servers", "bootstrap.servers").unwrap_err();
        assert!(refused.contains("servers setting") && refused.contains("policy.client.overrides allows tuning"));
        let all: Vec<String> = SettingKind::ALLOWABLE.iter().map(|k| k.name().to_string()).collect();
        let everything = ClientOverrides::parse(&all).unwrap();
        assert!(everything.check("k", "sasl.password").is_ok());
        let code = everything.check("consumer.override.plugin.library.paths", "plugin.library.paths").unwrap_err();
        assert!(code.contains("load code"), "{code}");
        assert!(ClientOverrides::parse(&["code".into()]).unwrap_err().contains("never allowed"));
        assert!(ClientOverrides::parse(&["tunning".into()]).is_err());
        let none = ClientOverrides::parse(&["none".into()]).unwrap();
        assert!(none.check("k", "linger.ms").unwrap_err().contains("allows none"));
    }
}
