//! `GET /metrics`: every task's counters in the Prometheus text format
//! (version 0.0.4), labelled by connector and task.

use super::AppState;
use super::error::ApiResult;
use crate::capabilities::op::{OpKey, OpStats};
use crate::herder::{ConnectorLag, ConnectorStateInfo, State as RunState, TaskMetricsEntry};
use crate::task::metrics::PUT_LATENCY_BUCKETS;
use crate::task::{FlushCause, TaskMetrics};
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub async fn handler(State(s): State<AppState>) -> ApiResult<impl IntoResponse> {
    let entries = s.herder.task_metrics().await?;
    let mut text = render(&entries);
    render_capabilities(&mut text, &s.herder.capability_metrics().await?);
    render_lag(&mut text, &s.herder.lag());
    let mut statuses = Vec::new();
    for name in s.herder.connectors().await? {
        // One deleted meanwhile is left out.
        statuses.extend(s.herder.status(name).await.ok());
    }
    render_states(&mut text, &statuses, s.herder.worker_id());
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text))
}

type Field = fn(&TaskMetrics) -> &AtomicU64;

const COUNTERS: [(&str, &str, Field); 16] = [
    ("spillway_records_polled_total", "Records fetched from Kafka.", |m| &m.polled),
    ("spillway_records_put_total", "Records handed to the plugin's put().", |m| &m.put),
    ("spillway_records_accepted_total", "Records the plugin accepted (acknowledged).", |m| &m.accepted),
    ("spillway_records_released_total", "Records released for redelivery.", |m| &m.released),
    (
        "spillway_records_renewed_total",
        "Share-group lock renewals (KIP-1222), one per record renewed: held or retried records kept, not released.",
        |m| &m.renewed,
    ),
    ("spillway_records_rejected_total", "Records rejected by the plugin.", |m| &m.rejected),
    ("spillway_records_dead_lettered_total", "Records written to the dead-letter queue.", |m| &m.dead_lettered),
    ("spillway_acks_refused_total", "Acknowledgements the consumer refused (redelivered).", |m| &m.ack_refused),
    ("spillway_commit_failures_total", "Failed offset commits or acknowledgements.", |m| &m.commit_failures),
    (
        "spillway_transactions_aborted_total",
        "Exactly-once transactions aborted; their records were consumed again from the last commit.",
        |m| &m.transactions_aborted,
    ),
    ("spillway_records_retried_total", "Records put again after put() asked for a retry.", |m| &m.retried),
    (
        "spillway_records_archived_total",
        "Share-group records the broker archives unwritten (rejected without a DLQ, or released on their last delivery).",
        |m| &m.archived,
    ),
    (
        "spillway_records_resent_while_held_total",
        "Records a broker sent again while the task held them; not handed to the plugin twice.",
        |m| &m.resent_while_held,
    ),
    (
        "spillway_batches_fetched_during_put_total",
        "Batches fetched while put() ran (when put() is slower than a fetch).",
        |m| &m.fetched_during_put,
    ),
    (
        "spillway_records_forgotten_at_rebalance_total",
        "Classic groups: records of partitions revoked while the task had them; their new owner delivers them again.",
        |m| &m.forgotten_at_rebalance,
    ),
    (
        "spillway_records_dropped_by_transforms_total",
        "Records a transform dropped (Filter, or Debezium's ExtractNewRecordState on a tombstone): done, not put.",
        |m| &m.dropped_by_transforms,
    ),
];

pub fn render(entries: &[TaskMetricsEntry]) -> String {
    let mut out = String::new();
    for (name, help, field) in COUNTERS {
        family(&mut out, name, help, "counter");
        for e in entries {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(e), field(&e.metrics).load(Relaxed));
        }
    }
    let flushes = "spillway_flushes_total";
    family(&mut out, flushes, "Flushes the host asked the plugin for, by cause (timer, cap, lock, stop).", "counter");
    for e in entries {
        for cause in FlushCause::ALL {
            let _ =
                writeln!(out, "{flushes}{{{},cause=\"{}\"}} {}", labels(e), cause.label(), e.metrics.flushes(cause));
        }
    }
    let memory = "spillway_plugin_memory_bytes";
    family(&mut out, memory, "Linear memory of the task's plugin instance.", "gauge");
    for e in entries {
        let _ = writeln!(out, "{memory}{{{}}} {}", labels(e), e.metrics.plugin_memory_bytes.load(Relaxed));
    }
    let in_flight = "spillway_task_records_in_flight";
    family(
        &mut out,
        in_flight,
        "Records the task took and has not acknowledged yet (in put(), held by the plugin, or kept for a retry).",
        "gauge",
    );
    for e in entries {
        let _ = writeln!(out, "{in_flight}{{{}}} {}", labels(e), e.metrics.in_flight.load(Relaxed));
    }
    let latency = "spillway_put_latency_seconds";
    family(&mut out, latency, "Time one put() call took.", "histogram");
    for e in entries {
        histogram(&mut out, latency, &labels(e), &e.metrics);
    }
    out
}

/// Capability operations, labelled by capability and operation.
fn render_capabilities(out: &mut String, ops: &[(OpKey, OpStats)]) {
    let labels = |key: &OpKey| format!("capability=\"{}\",op=\"{}\"", key.capability, key.op);
    let calls = "spillway_capability_calls_total";
    family(out, calls, "Capability operations by outcome (ok, retriable, fatal).", "counter");
    for (key, s) in ops {
        for (outcome, n) in [("ok", s.ok), ("retriable", s.retriable_errors), ("fatal", s.fatal_errors)] {
            let _ = writeln!(out, "{calls}{{{},outcome=\"{outcome}\"}} {n}", labels(key));
        }
    }
    type Stat = fn(&OpStats) -> String;
    let totals: [(&str, &str, Stat); 3] = [
        ("spillway_capability_retries_total", "Attempts after the first, after retriable failures.", |s| {
            s.retries.to_string()
        }),
        ("spillway_capability_bytes_total", "Payload bytes written or read.", |s| s.bytes.to_string()),
        ("spillway_capability_seconds_total", "Time spent in capability operations, retries included.", |s| {
            s.seconds.to_string()
        }),
    ];
    for (name, help, stat) in totals {
        family(out, name, help, "counter");
        for (key, s) in ops {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(key), stat(s));
        }
    }
}

/// Each connector's lag per partition, as last measured (see the status's
/// `lag`), with when: a gauge that stopped moving is told from a stale one.
fn render_lag(out: &mut String, lags: &BTreeMap<String, ConnectorLag>) {
    let records = "spillway_consumer_lag_records";
    family(out, records, "Records between the connector's group position and the log end, per partition.", "gauge");
    for (connector, lag) in lags {
        for p in &lag.partitions {
            let (connector, topic) = (escape(connector), escape(&p.topic));
            let labels = format!("connector=\"{connector}\",topic=\"{topic}\",partition=\"{}\"", p.partition);
            let _ = writeln!(out, "{records}{{{labels}}} {}", p.records);
        }
    }
    let measured = "spillway_consumer_lag_measured_timestamp_seconds";
    family(out, measured, "When the connector's lag was last measured.", "gauge");
    for (connector, lag) in lags {
        let _ = writeln!(out, "{measured}{{connector=\"{}\"}} {}", escape(connector), lag.measured_at_ms as f64 / 1e3);
    }
}

/// Each state's name in a metric, as Connect's: `connector-running-task-count`.
const STATES: [(RunState, &str); 6] = [
    (RunState::Running, "running"),
    (RunState::Paused, "paused"),
    (RunState::Stopped, "stopped"),
    (RunState::Failed, "failed"),
    (RunState::Unassigned, "unassigned"),
    (RunState::Restarting, "restarting"),
];

/// Connect's worker metrics by state, for what runs on this worker
/// (`worker_id`): `connector-count` and `task-count`, and each connector's
/// `connector-<state>-task-count`; and connector-metrics' `status`, as one
/// gauge per state, 1 for the state the connector is in.
fn render_states(out: &mut String, statuses: &[ConnectorStateInfo], worker_id: &str) {
    let here = |w: &str| w == worker_id;
    let connectors = statuses.iter().filter(|s| here(&s.connector.worker_id)).count();
    let tasks = statuses.iter().flat_map(|s| &s.tasks).filter(|t| here(&t.worker_id)).count();
    family(out, "spillway_connector_count", "Connectors run on this worker (Connect's connector-count).", "gauge");
    let _ = writeln!(out, "spillway_connector_count {connectors}");
    family(out, "spillway_task_count", "Tasks run on this worker (Connect's task-count).", "gauge");
    let _ = writeln!(out, "spillway_task_count {tasks}");
    for (state, label) in STATES {
        let name = format!("spillway_connector_{label}_task_count");
        let help = format!("The connector's {label} tasks on this worker (Connect's connector-{label}-task-count).");
        family(out, &name, &help, "gauge");
        for status in statuses {
            let n = status.tasks.iter().filter(|t| here(&t.worker_id) && t.state == state).count();
            let _ = writeln!(out, "{name}{{connector=\"{}\"}} {n}", escape(&status.name));
        }
    }
    let name = "spillway_connector_status";
    family(out, name, "1 for the state the connector is in, 0 for the others (Connect's connector status).", "gauge");
    for status in statuses {
        for (state, label) in STATES {
            let is = u8::from(status.connector.state == state);
            let _ = writeln!(out, "{name}{{connector=\"{}\",status=\"{label}\"}} {is}", escape(&status.name));
        }
    }
}

fn family(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The task keeps a count per bucket; Prometheus wants them cumulative. The
/// total is taken from the buckets themselves rather than `put_calls`, so that
/// `+Inf` and `_count` agree even while a put is being recorded.
fn histogram(out: &mut String, name: &str, labels: &str, m: &TaskMetrics) {
    let mut cumulative = 0;
    for (i, bucket) in m.put_latency_buckets.iter().enumerate() {
        cumulative += bucket.load(Relaxed);
        let le = PUT_LATENCY_BUCKETS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
    }
    let sum = m.put_latency_sum_micros.load(Relaxed) as f64 / 1e6;
    let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}\n{name}_count{{{labels}}} {cumulative}");
}

fn labels(e: &TaskMetricsEntry) -> String {
    format!("connector=\"{}\",task=\"{}\"", escape(&e.connector), e.task)
}

/// Label values escape backslash, double quote and newline.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn renders_each_partitions_lag_and_when_it_was_measured() {
        use crate::herder::PartitionLag;
        let partition = |partition, offset, log_end, records| PartitionLag {
            topic: "orders".into(),
            partition,
            offset,
            log_end,
            records,
        };
        let lag = ConnectorLag {
            records: 12,
            partitions: vec![partition(0, Some(8), 10, 2), partition(1, None, 10, 10)],
            measured_at_ms: 1_700_000_000_500,
        };
        let mut text = String::new();
        render_lag(&mut text, &BTreeMap::from([("c\"1".to_string(), lag)]));
        let l = "connector=\"c\\\"1\",topic=\"orders\"";
        assert!(text.contains(&format!("spillway_consumer_lag_records{{{l},partition=\"0\"}} 2\n")), "{text}");
        assert!(text.contains(&format!("spillway_consumer_lag_records{{{l},partition=\"1\"}} 10\n")), "{text}");
        let measured = "spillway_consumer_lag_measured_timestamp_seconds{connector=\"c\\\"1\"} 1700000000.5\n";
        assert!(text.contains(measured), "{text}");
        assert!(text.contains("# TYPE spillway_consumer_lag_records gauge\n"), "{text}");
    }

    #[test]
    fn renders_counters_and_a_cumulative_histogram() {
        let metrics = Arc::new(TaskMetrics::default());
        metrics.accepted.store(7, Relaxed);
        metrics.observe_put(Duration::from_micros(500), 3);
        metrics.observe_put(Duration::from_millis(20), 4);
        metrics.observe_put(Duration::from_secs(60), 1);
        let entries = [TaskMetricsEntry { connector: "a\"b".into(), task: 1, metrics }];
        let text = render(&entries);
        let l = r#"connector="a\"b",task="1""#;
        assert!(text.contains(&format!("spillway_records_accepted_total{{{l}}} 7\n")), "{text}");
        assert!(text.contains(&format!("spillway_records_put_total{{{l}}} 8\n")));
        assert!(text.contains(&format!("spillway_put_latency_seconds_bucket{{{l},le=\"0.001\"}} 1\n")));
        assert!(text.contains(&format!("spillway_put_latency_seconds_bucket{{{l},le=\"0.01\"}} 1\n")));
        assert!(text.contains(&format!("spillway_put_latency_seconds_bucket{{{l},le=\"0.025\"}} 2\n")));
        assert!(text.contains(&format!("spillway_put_latency_seconds_bucket{{{l},le=\"30\"}} 2\n")));
        assert!(text.contains(&format!("spillway_put_latency_seconds_bucket{{{l},le=\"+Inf\"}} 3\n")));
        assert!(text.contains(&format!("spillway_put_latency_seconds_count{{{l}}} 3\n")));
        assert!(text.contains(&format!("spillway_put_latency_seconds_sum{{{l}}} 60.0205\n")));
        assert!(text.contains("# TYPE spillway_put_latency_seconds histogram\n"));
    }

    #[test]
    fn renders_connector_and_task_states_of_this_worker() {
        use crate::herder::{InstanceState, TaskState};
        let instance = |state, worker: &str| InstanceState {
            state,
            worker_id: worker.into(),
            trace: None,
            version: None,
            derived_grants: Vec::new(),
        };
        let task = |id: u32, state: RunState, worker: &str| -> TaskState {
            serde_json::from_value(serde_json::json!({"id": id, "state": state, "worker_id": worker})).unwrap()
        };
        let status = |name: &str, state, tasks| ConnectorStateInfo {
            name: name.into(),
            connector: instance(state, "here:8083"),
            tasks,
            kind: "sink".into(),
            lag: None,
        };
        let statuses = [
            status(
                "a",
                RunState::Running,
                vec![
                    task(0, RunState::Running, "here:8083"),
                    task(1, RunState::Failed, "here:8083"),
                    task(2, RunState::Running, "there:8083"),
                ],
            ),
            status("b", RunState::Paused, vec![task(0, RunState::Paused, "here:8083")]),
        ];
        let mut text = String::new();
        render_states(&mut text, &statuses, "here:8083");
        for line in [
            "spillway_connector_count 2\n",
            "spillway_task_count 3\n",
            "spillway_connector_running_task_count{connector=\"a\"} 1\n",
            "spillway_connector_failed_task_count{connector=\"a\"} 1\n",
            "spillway_connector_paused_task_count{connector=\"a\"} 0\n",
            "spillway_connector_paused_task_count{connector=\"b\"} 1\n",
            "spillway_connector_status{connector=\"a\",status=\"running\"} 1\n",
            "spillway_connector_status{connector=\"a\",status=\"failed\"} 0\n",
            "spillway_connector_status{connector=\"b\",status=\"paused\"} 1\n",
            "# TYPE spillway_connector_restarting_task_count gauge\n",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
    }

    #[test]
    fn renders_capability_operations() {
        let key = OpKey { capability: "object-store", op: "put" };
        let stats = OpStats { ok: 3, retriable_errors: 1, retries: 2, bytes: 300, seconds: 0.5, ..OpStats::default() };
        let mut text = String::new();
        render_capabilities(&mut text, &[(key, stats)]);
        let l = r#"capability="object-store",op="put""#;
        assert!(text.contains(&format!("spillway_capability_calls_total{{{l},outcome=\"ok\"}} 3\n")), "{text}");
        assert!(text.contains(&format!("spillway_capability_calls_total{{{l},outcome=\"retriable\"}} 1\n")));
        assert!(text.contains(&format!("spillway_capability_calls_total{{{l},outcome=\"fatal\"}} 0\n")));
        assert!(text.contains(&format!("spillway_capability_retries_total{{{l}}} 2\n")));
        assert!(text.contains(&format!("spillway_capability_bytes_total{{{l}}} 300\n")));
        assert!(text.contains(&format!("spillway_capability_seconds_total{{{l}}} 0.5\n")));
    }
}
