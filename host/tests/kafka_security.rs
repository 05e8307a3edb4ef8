//! The host's Kafka clients on a secured cluster: SASL SCRAM-SHA-512 over
//! TLS on Apache Kafka's own SASL_SSL listener (the user made at format
//! time by `scripts/kafka.sh --scram`), and TLS with a client certificate
//! plus SCRAM played by the fault proxy in front of the test broker
//! (`support/secured.rs`): it terminates TLS, requiring a certificate signed
//! by the test CA, and checks each connection's SCRAM proof before it relays
//! anything but ApiVersions, which lets the test see every exchange. Our
//! share consumer and librdkafka (classic consumer, producer) go through
//! both; SCRAM's client side is also checked against RFC 7677's vectors in
//! the host's unit tests.

#[path = "support/fault_proxy.rs"]
mod fault_proxy;
mod support;

use fault_proxy::secured::{SaslUser, TestPki};
use fault_proxy::{Event, FaultProxy, Secured};
use kafka_protocol::messages::ApiKey;
use spillway::connector::{ConnectorConfig, WorkerDefaults};
use spillway::kafka::clients::{ClientSettings, Role};
use spillway::kafka::producer::Producer;
use spillway::policy::ClientOverrides;
use spillway::task::{self, TaskMetrics, TaskSpec};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::herder::{plugin_dir, test_runtime};
use support::{Broker, assert_each_exactly_once, unique};
use tokio_util::sync::CancellationToken;

const USER: &str = "spillway";
const PASSWORD: &str = "pencil";

fn secured_proxy(broker: &Broker, pki: &TestPki) -> FaultProxy {
    FaultProxy::start_secured(
        &broker.bootstrap,
        Secured {
            tls: Some(pki.server_config()),
            sasl: Some(SaslUser { mechanism: "SCRAM-SHA-512", user: USER.into(), password: PASSWORD.into() }),
        },
    )
}

/// The worker config's security keys for `pki`'s cluster.
fn worker_security(pki: &TestPki, password: &str) -> BTreeMap<String, String> {
    [
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", USER),
        ("sasl.password", password),
        ("ssl.ca.location", pki.ca.to_str().unwrap()),
        ("ssl.certificate.location", pki.client_certificate.to_str().unwrap()),
        ("ssl.key.location", pki.client_key.to_str().unwrap()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn connector(topic: &str, dir: &Path, protocol: &str) -> BTreeMap<String, String> {
    let record_file = dir.join(format!("{protocol}-keys.txt"));
    [
        ("name", format!("secured-{protocol}")),
        ("connector.class", "misbehave".into()),
        ("mode", "accept".into()),
        ("record.file", record_file.to_str().unwrap().into()),
        ("topics", topic.into()),
        ("consumer.override.group.protocol", protocol.into()),
        ("consumer.override.group.id", unique("secured")),
        ("plugin.grant.fs.data.path", dir.to_str().unwrap().into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn accepted_keys(dir: &Path, protocol: &str) -> Vec<String> {
    let file = dir.join(format!("{protocol}-keys.txt"));
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines().map(|line| line.split('\t').next().unwrap().to_string()).collect()
}

async fn start_task(bootstrap: &str, config: ConnectorConfig) -> anyhow::Result<task::TaskLoop> {
    let runtime = test_runtime();
    let plugin = runtime.load_file(&plugin_dir().join("misbehave.wasm")).await.unwrap();
    let spec = TaskSpec {
        task_id: 0,
        config: Arc::new(config),
        plugin,
        transforms: Vec::new(),
        bootstrap_servers: bootstrap.to_string(),
        metrics: Arc::new(TaskMetrics::default()),
    };
    task::start(&runtime, spec).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn share_and_classic_tasks_consume_over_tls_and_scram() {
    let broker = Broker::start_or_env();
    let pki = TestPki::new();
    let proxy = secured_proxy(&broker, &pki);
    let clients = ClientSettings::from_worker(&worker_security(&pki, PASSWORD)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // librdkafka's producer goes through the proxy too: TLS and SCRAM as well.
    consume_share_and_classic(&proxy.bootstrap, &clients, dir.path(), || {
        proxy.events().contains(&Event::Forwarded(ApiKey::ShareFetch, None))
    })
    .await;

    let events = proxy.events();
    let authenticated = events.iter().filter(|e| **e == Event::Authenticated(Ok(USER.into()))).count();
    let refused: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::Authenticated(Err(_)) | Event::Unauthenticated(_) | Event::TlsFailed(_)))
        .collect();
    assert!(refused.is_empty(), "connections the proxy refused: {refused:?}");
    assert!(authenticated >= 3, "{authenticated} SCRAM exchanges: producer, share and classic consumers each do one");
    println!("{authenticated} connections authenticated with SCRAM-SHA-512 over TLS; broker: {}", broker.description);
}

/// Runs a share and a classic task of `misbehave` on `bootstrap` with the
/// worker's `clients`; each must accept 200 records exactly once. `fetched`
/// says when the share task has fetched (a share group on the mock starts at
/// the log end from its first fetch).
async fn consume_share_and_classic(bootstrap: &str, clients: &ClientSettings, dir: &Path, fetched: impl Fn() -> bool) {
    let worker = WorkerDefaults { clients: clients.clone(), ..Default::default() };
    let producer = Producer::connect(bootstrap, &clients.for_role(Role::Producer)).await.unwrap();
    for protocol in ["share", "classic"] {
        let topic = unique("secured");
        let config = ConnectorConfig::parse(&connector(&topic, dir, protocol), &worker).unwrap();
        if protocol == "classic" {
            // A classic group starts at the earliest offset.
            producer.send_samples(&topic, 0, 200).await.unwrap();
        }
        let task = start_task(bootstrap, config).await.unwrap();
        let stop = CancellationToken::new();
        let running = tokio::spawn(task.run(stop.clone()));
        if protocol == "share" {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !fetched() {
                assert!(Instant::now() < deadline, "the share consumer never fetched");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            producer.send_samples(&topic, 0, 200).await.unwrap();
        }
        let expected: Vec<String> = (0..200).map(|i| format!("key-{i}")).collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while accepted_keys(dir, protocol).len() < expected.len() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await; // for a late duplicate to show
        stop.cancel();
        running.await.unwrap();
        // No fault injected: each record exactly once.
        assert_each_exactly_once(&accepted_keys(dir, protocol), &expected, protocol);
        std::fs::remove_file(dir.join(format!("{protocol}-keys.txt"))).ok();
    }
}

/// Apache Kafka's own SASL_SSL listener: the SCRAM user test.sh's broker was
/// formatted with (or a cluster of this test's own, where none is shared),
/// the broker's certificate checked against the CA kafka.sh made; a wrong
/// password is refused by the broker itself, and the error says so without
/// the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_consume_on_kafkas_own_sasl_ssl_listener_and_a_wrong_password_is_refused() {
    let cluster = support::cluster::SecuredKafka::shared_or_start();
    println!("broker: Apache Kafka's SASL_SSL listener at {}", cluster.sasl_bootstrap);
    let security = |password: &str| -> BTreeMap<String, String> {
        [
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", cluster.user.as_str()),
            ("sasl.password", password),
            ("ssl.ca.location", cluster.ca.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    };
    let clients = ClientSettings::from_worker(&security(&cluster.password)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Apache Kafka: connectors' share groups start at the earliest offset,
    // so the share task needs no first fetch before records come.
    consume_share_and_classic(&cluster.sasl_bootstrap, &clients, dir.path(), || true).await;

    let worker = WorkerDefaults {
        clients: ClientSettings::from_worker(&security("not-the-password")).unwrap(),
        ..Default::default()
    };
    let topic = unique("refused");
    let config = ConnectorConfig::parse(&connector(&topic, dir.path(), "share"), &worker).unwrap();
    let refused = start_task(&cluster.sasl_bootstrap, config).await.err().expect("a wrong password refused");
    let message = format!("{refused:#}");
    assert!(message.contains("authenticating to 127.0.0.1:"), "{message}");
    assert!(!message.contains("not-the-password"), "the password shows: {message}");
    println!("refused: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_or_an_unknown_ca_fails_the_share_task_clearly() {
    let broker = Broker::start_or_env();
    let pki = TestPki::new();
    let proxy = secured_proxy(&broker, &pki);
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("refused");
    let config = |security: BTreeMap<String, String>| {
        let worker = WorkerDefaults { clients: ClientSettings::from_worker(&security).unwrap(), ..Default::default() };
        ConnectorConfig::parse(&connector(&topic, dir.path(), "share"), &worker).unwrap()
    };

    let wrong_password =
        start_task(&proxy.bootstrap, config(worker_security(&pki, "pen"))).await.err().expect("refused");
    let message = format!("{wrong_password:#}");
    assert!(message.contains("authenticating to 127.0.0.1:") && message.contains("invalid credentials"), "{message}");
    assert!(!message.contains("pen\""), "the password shows: {message}");
    assert!(matches!(proxy.events().last(), Some(Event::Authenticated(Err(why))) if why == "wrong SCRAM proof"));

    let other = TestPki::new();
    let mut untrusted = worker_security(&pki, PASSWORD);
    untrusted.insert("ssl.ca.location".into(), other.ca.to_str().unwrap().into());
    let message = format!("{:#}", start_task(&proxy.bootstrap, config(untrusted)).await.err().expect("refused"));
    // The two test CAs share a name: rustls finds the issuer, and its signature fails.
    assert!(message.contains("TLS handshake: invalid peer certificate"), "{message}");

    // Checked when the config is parsed, on the key that names it: first
    // against the worker's policy (trust stores are security settings),
    // then as the client would read it.
    let mut raw = connector(&topic, dir.path(), "share");
    raw.insert("consumer.override.ssl.ca.location".into(), "/nonexistent/ca.pem".into());
    let mut worker = WorkerDefaults {
        clients: ClientSettings::from_worker(&worker_security(&pki, PASSWORD)).unwrap(),
        ..Default::default()
    };
    let problems = ConnectorConfig::parse(&raw, &worker).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].message.contains("policy.client.overrides allows tuning"), "{problems:?}");
    worker.policy.client_overrides = ClientOverrides::parse(&["tuning".into(), "security".into()]).unwrap();
    let problems = ConnectorConfig::parse(&raw, &worker).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].key, "consumer.override.ssl.ca.location");
    assert!(problems[0].message.contains("cannot read /nonexistent/ca.pem"), "{problems:?}");
}
