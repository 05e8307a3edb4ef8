//! Spillway answers as Kafka Connect answers: one scripted sequence of REST
//! calls (`sequence.rs`) runs against a real Kafka Connect worker with its
//! FileStreamSinkConnector and against `spillway serve` with `file-sink`,
//! standalone beside standalone and a group beside a distributed worker, all
//! on the test broker. Status codes and the JSON of every answer are compared
//! after the written normalisation rules (`normalise.rs`); a difference
//! fails the test unless `tests/connect-compat/allow-list.md` lists it with
//! its reason, and an entry that no longer matches anything fails it too.
//! README's compatibility section prints the allow-list.
//!
//! Every answer is written to `target/tmp/connect-compat/` for reading.

#[path = "../support/mod.rs"]
mod support;

mod compare;
mod normalise;
mod sequence;
mod targets;

use compare::{Difference, glob};
use std::path::PathBuf;
use support::cluster::{Cluster, create_topic};
use targets::Target;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One entry of the allow-list: differences Spillway keeps, and why.
struct Allowed {
    /// Globs of steps, any of which matches.
    steps: Vec<String>,
    /// Globs of where in the answer, any of which matches.
    at: Vec<String>,
    why: String,
}

impl Allowed {
    fn covers(&self, difference: &Difference) -> bool {
        self.steps.iter().any(|s| glob(s, difference.step)) && self.at.iter().any(|a| glob(a, &difference.at))
    }
}

/// The allow-list's table rows: `| steps | where | why |`, each glob in
/// backticks, several in one cell separated by commas.
fn allow_list() -> Vec<Allowed> {
    let text = std::fs::read_to_string(repo().join("tests/connect-compat/allow-list.md")).unwrap();
    text.lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 3, "an allow-list row has three cells: {line}");
            let globs = |cell: &str| cell.split(", ").map(|g| g.trim_matches('`').to_string()).collect();
            assert!(!cells[2].is_empty(), "an allow-list entry says why: {line}");
            Allowed { steps: globs(cells[0]), at: globs(cells[1]), why: cells[2].to_string() }
        })
        .collect()
}

/// test.sh's shared Apache Kafka, or else one of this test's own: Kafka
/// Connect needs a real broker (librdkafka's mock lacks its admin calls).
/// Answers the bootstrap, its description, and what stops an own cluster.
fn shared_or_own_kafka() -> (String, String, Option<Cluster>) {
    if std::env::var_os(support::BOOTSTRAP_ENV).is_some() {
        let broker = support::Broker::start_or_env();
        return (broker.bootstrap.clone(), broker.description.clone(), None);
    }
    let own = Cluster::kafka();
    (own.bootstrap.clone(), own.description.clone(), Some(own))
}

/// Runs the sequence on both targets at once and returns the differences.
async fn compare(mode: &'static str, bootstrap: &str, connect: Target, spillway: Target) -> Vec<Difference> {
    for target in [&connect, &spillway] {
        println!("{mode}: {} at {}", target.label, target.url);
        create_topic(bootstrap, &target.topic, 1).await;
        support::produce_to(bootstrap, &target.topic, Some(0), sequence::RECORDS as usize).await;
    }
    let (connect_answers, spillway_answers) = tokio::join!(sequence::run(&connect), sequence::run(&spillway));
    let out = repo().join("target/tmp/connect-compat");
    std::fs::create_dir_all(&out).unwrap();
    for (side, answers) in [("connect", &connect_answers), ("spillway", &spillway_answers)] {
        let dump: Vec<_> = answers
            .iter()
            .map(|a| serde_json::json!({"step": a.step, "status": a.status, "body": a.body, "timed_out": a.timed_out}))
            .collect();
        std::fs::write(out.join(format!("{mode}-{side}.json")), serde_json::to_string_pretty(&dump).unwrap()).unwrap();
    }
    compare::differences(mode, (&connect, &connect_answers), (&spillway, &spillway_answers))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spillway_answers_as_kafka_connect() {
    let (bootstrap, description, _own) = shared_or_own_kafka();
    println!("broker: {description}");
    let run = support::unique("").trim_start_matches('-')[..8].to_string();

    let standalone = compare(
        "standalone",
        &bootstrap,
        Target::connect(&bootstrap, None, &format!("standalone-{run}")),
        Target::spillway(&bootstrap, None, &format!("standalone-{run}")).await,
    );
    let group = format!("diff-{run}");
    let distributed = compare(
        "distributed",
        &bootstrap,
        Target::connect(&bootstrap, Some(&format!("{group}-connect")), &format!("distributed-{run}")),
        Target::spillway(&bootstrap, Some(&format!("{group}-spillway")), &format!("distributed-{run}")).await,
    );
    let (mut differences, distributed) = tokio::join!(standalone, distributed);
    differences.extend(distributed);

    let allowed = allow_list();
    let mut used = vec![false; allowed.len()];
    let mut unexplained = Vec::new();
    for difference in &differences {
        let entry = allowed.iter().position(|a| a.covers(difference));
        match entry {
            Some(i) => used[i] = true,
            None => unexplained.push(difference.to_string()),
        }
    }
    println!("{} difference(s), {} on the allow-list", differences.len(), differences.len() - unexplained.len());
    let listed: Vec<String> = differences.iter().map(ToString::to_string).collect();
    std::fs::write(repo().join("target/tmp/connect-compat/differences.txt"), listed.join("\n") + "\n").unwrap();
    let stale: Vec<String> = allowed
        .iter()
        .zip(&used)
        .filter(|(_, used)| !**used)
        .map(|(a, _)| format!("{:?} {:?}: {}", a.steps, a.at, a.why))
        .collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "differences from Kafka Connect not on tests/connect-compat/allow-list.md:\n{}\n\
         allow-list entries that matched nothing (remove them):\n{}",
        unexplained.join("\n"),
        stale.join("\n")
    );
}

/// README's compatibility section holds the allow-list's table as is.
#[test]
fn readme_prints_the_allow_list() {
    let allowed = allow_list();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let text = std::fs::read_to_string(repo().join("tests/connect-compat/allow-list.md")).unwrap();
    let table: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
    assert!(!allowed.is_empty() || table.len() == 2, "the allow-list's table is empty");
    for row in table {
        assert!(readme.contains(row), "README's compatibility section lacks this allow-list row:\n{row}");
    }
}
