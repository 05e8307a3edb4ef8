//! A sink task: one plugin instance fed by one group member.

pub mod config;
mod convert;
mod dead_letter;
pub mod metrics;
mod run;
mod source;

pub use config::{ConnectorConfig, GroupProtocol, Tolerance, WorkerDefaults};
pub use metrics::TaskMetrics;
pub use run::{TaskExit, TaskLoop};

use crate::kafka::classic::ClassicSource;
use crate::kafka::producer::Producer;
use crate::kafka::share::{ShareConsumer, ShareConsumerConfig};
use crate::runtime::{Plugin, Runtime};
use anyhow::{Context, Result, anyhow};
use dead_letter::DeadLetterQueue;
use source::Source;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What a task needs to start.
pub struct TaskSpec {
    pub task_id: u32,
    pub config: Arc<ConnectorConfig>,
    pub plugin: Plugin,
    pub bootstrap_servers: String,
    pub metrics: Arc<TaskMetrics>,
}

/// Joins the group, instantiates and starts the plugin: the task is then
/// ready to run. Errors here fail the task before it consumed anything.
pub async fn start(runtime: &Runtime, spec: TaskSpec) -> Result<TaskLoop> {
    let config = spec.config;
    let name = format!("{}-{}", config.name, spec.task_id);

    // Like Connect's task configs, each task's config names its task.
    let mut plugin_config: Vec<(String, String)> = config.raw.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    plugin_config.push(("task.id".into(), spec.task_id.to_string()));
    let mut instance = runtime.instantiate(&spec.plugin, &name, &config.grants, &config.limits)?;
    let instance = tokio::task::spawn_blocking(move || {
        instance.start(&plugin_config).map(|()| instance).map_err(|e| anyhow!("plugin start: {e}"))
    })
    .await??;

    let source = match config.group_protocol {
        GroupProtocol::Classic => Source::Classic(ClassicSource::new(
            &spec.bootstrap_servers,
            &config.group_id,
            &config.topics,
            &config.consumer_overrides,
            config.batch_max_records,
        )?),
        GroupProtocol::Share => {
            let mut share = ShareConsumerConfig::new(&spec.bootstrap_servers, &config.group_id, &[]);
            share.topics = config.topics.clone();
            share.client_id = format!("spillway-{name}");
            share.max_records = config.batch_max_records as i32;
            Source::Share(Box::new(ShareConsumer::connect(share).await.context("joining the share group")?))
        }
    };

    let dlq = match &config.errors.dlq_topic {
        Some(topic) => Some(DeadLetterQueue {
            producer: Producer::new(&spec.bootstrap_servers, &[]).context("creating the dead-letter producer")?,
            topic: topic.clone(),
            context_headers: config.errors.dlq_context_headers,
            connector: config.name.clone(),
            task: spec.task_id,
        }),
        None => None,
    };

    Ok(TaskLoop {
        name,
        config,
        source,
        plugin: Some(instance),
        dlq,
        metrics: spec.metrics,
        in_flight: HashMap::new(),
        held: BTreeMap::new(),
        first_retry: HashMap::new(),
        next_id: 0,
        consecutive_retries: 0,
        interrupt_on: None,
    })
}
