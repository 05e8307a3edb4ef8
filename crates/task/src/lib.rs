//! A sink task: one plugin instance fed by one group member.

mod convert;
mod converters;
mod dead_letter;
mod in_flight;
pub mod metrics;
mod run;
mod source;
mod transforms;

pub use metrics::{ActiveTopics, DeliveryGuarantee, FlushCause, ShareDelivery, TaskMetrics};
pub use run::{Swap, Swapped};
pub use run::{TaskExit, TaskLoop};

use anyhow::{Context, Result, anyhow, bail};
use converters::Converting;
use dead_letter::DeadLetterQueue;
use in_flight::InFlight;
use run::PluginSlot;
use source::Source;
use spillway_capabilities::kafka::TaskScope;
use spillway_connector::{ConnectorConfig, GroupProtocol, connector_keys, looks_secret};
use spillway_kafka::classic::ClassicSource;
use spillway_kafka::clients::{ClusterAccess, Role};
use spillway_kafka::producer::Producer;
use spillway_kafka::share::{ShareConsumer, ShareConsumerConfig};
use spillway_kafka::target::TargetCluster;
use spillway_runtime::{Plugin, PluginInstance, Runtime};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use transforms::Transforms;
pub use transforms::{start_instances as start_transforms, stop_all as stop_transforms};

/// What a task needs to start.
pub struct TaskSpec {
    pub task_id: u32,
    pub config: Arc<ConnectorConfig>,
    pub plugin: Plugin,
    /// The build of each transform plugin in the chain, in order.
    pub transforms: Vec<Plugin>,
    pub bootstrap_servers: String,
    pub metrics: Arc<TaskMetrics>,
}

/// Makes an instance of `plugin` for one task of the connector, with the
/// connector's grants, starts it and connects its kafka grants. Returns the
/// exactly-once grant's cluster, if any.
pub async fn start_instance(
    runtime: &Runtime,
    plugin: &Plugin,
    config: &ConnectorConfig,
    task_id: u32,
    bootstrap_servers: &str,
) -> Result<(PluginInstance, Option<Arc<TargetCluster>>)> {
    let name = format!("{}-{task_id}", config.name);
    // Like Connect's task configs, each task's config names its task. The
    // host's secrets (a grant's credentials) stay in the host, and so does a
    // key that names a secret unless the plugin declares it.
    let keys = connector_keys();
    let declared = |key: &str| plugin.metadata.config.iter().any(|k| k.name == key);
    // The chain's keys are the transforms' (a transform plugin's secrets
    // among them), not the sink's.
    let chain_key = |key: &str| key.starts_with("transforms.") || key.starts_with("predicates.");
    let reads = |key: &str| !keys.is_secret(key) && !chain_key(key) && (!looks_secret(key) || declared(key));
    let mut plugin_config: Vec<(String, String)> =
        config.raw.iter().filter(|(k, _)| reads(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    plugin_config.push(("task.id".into(), task_id.to_string()));
    let mut grants = config.grants.clone();
    grants.task = Some(TaskScope {
        connector: config.name.clone(),
        task: task_id,
        // Fixed per connector, whatever its consumer group: exactly-once
        // positions stay found if the group id changes.
        offsets_group: format!("connect-{}", config.name),
        source: ClusterAccess::new(bootstrap_servers, &config.clients),
        topics: config.topics.clone(),
        topics_regex: config.topics_regex.clone(),
        worker_topics: config.worker_topics.clone(),
    });
    let mut instance = runtime.instantiate(plugin, &name, &grants, &config.limits).await?;
    instance.start(&plugin_config).await.map_err(|e| anyhow!("plugin start: {e}"))?;
    // Kafka grants connect before the group is joined; exactly-once opens
    // the task's transactional producer, fencing older instances of it.
    let exactly_once = instance.connect_kafka().await.context("connecting the kafka grants")?;
    Ok((instance, exactly_once))
}

/// Joins the group, instantiates and starts the plugin: the task is then
/// ready to run. Errors here fail the task before it consumed anything.
pub async fn start(runtime: &Runtime, spec: TaskSpec) -> Result<TaskLoop> {
    let config = spec.config;
    let name = format!("{}-{}", config.name, spec.task_id);
    // The transforms first: they connect nothing, and one that fails to
    // start leaves no sink instance with open Kafka grants behind.
    let mut transforms = Transforms::start(runtime, &config, &spec.transforms, &name).await?;
    let (instance, exactly_once) =
        match start_instance(runtime, &spec.plugin, &config, spec.task_id, &spec.bootstrap_servers).await {
            Ok(started) => started,
            Err(e) => {
                transforms.stop().await;
                return Err(e);
            }
        };
    let guarantee = match exactly_once {
        Some(_) => DeliveryGuarantee::ExactlyOnce,
        None => DeliveryGuarantee::AtLeastOnce,
    };
    let _ = spec.metrics.delivery_guarantee.set(guarantee);

    // Before the group is joined: see `Producer::connect`.
    let dlq = match &config.errors.dlq_topic {
        Some(topic) => Some(DeadLetterQueue {
            producer: Producer::connect(&spec.bootstrap_servers, &config.clients.for_role(Role::Producer))
                .await
                .context("creating the dead-letter producer")?,
            topic: topic.clone(),
            context_headers: config.errors.dlq_context_headers,
            connector: config.name.clone(),
            task: spec.task_id,
        }),
        None => None,
    };

    let source = match config.group_protocol {
        GroupProtocol::Classic => Source::Classic(ClassicSource::new(
            &spec.bootstrap_servers,
            &config.group_id,
            &config.topics,
            config.topics_regex.as_deref(),
            &config.clients.for_role(Role::Consumer),
            config.batch_max_records,
            exactly_once,
        )?),
        GroupProtocol::Share => {
            if exactly_once.is_some() {
                bail!("exactly-once needs a classic consumer group: share acknowledgements cannot join a transaction");
            }
            let mut share = ShareConsumerConfig::new(&spec.bootstrap_servers, &config.group_id, &[]);
            share.topics = config.topics.clone();
            share.topics_regex = config.topics_regex.clone();
            share.topics_refresh = config.topics_refresh;
            share.client_id = format!("spillway-{name}");
            share.max_records = config.batch_max_records as i32;
            share.security = config.clients.security(Role::Consumer).map_err(|e| anyhow!("consumer security: {e}"))?;
            // Where Connect's sink consumers start: the earliest offset,
            // unless the connector overrides auto.offset.reset.
            let reset = config.clients.for_role(Role::Consumer).into_iter().find(|(k, _)| k == "auto.offset.reset");
            share.auto_offset_reset = Some(reset.map_or_else(|| "earliest".to_string(), |(_, v)| v));
            share.group_configs = config.share_group_configs.clone();
            let consumer = ShareConsumer::connect(share).await.context("joining the share group")?;
            let limit = consumer.delivery_limit();
            tracing::info!(task = name, limit = limit.limit, source = limit.source, "share delivery count limit");
            tracing::info!(task = name, configs = ?consumer.group_configs(), "share group configs");
            let _ = spec.metrics.share_delivery.set(ShareDelivery {
                delivery_count_limit: limit.limit,
                limit_source: limit.source.clone(),
                group_configs: consumer.group_configs().clone(),
                locks: locks_policy(consumer.renews_locks()).into(),
                renews_locks: consumer.renews_locks(),
            });
            Source::Share(Box::new(consumer))
        }
    };
    let delivery_limit = match &source {
        Source::Share(consumer) => Some(consumer.delivery_limit().limit),
        Source::Classic(_) => None,
    };
    // As Connect's WorkerSinkTask says it, at the level it says it.
    let (group, protocol) = (&config.group_id, config.group_protocol);
    tracing::info!(task = name, group, ?protocol, "sink task finished initialization and start");

    let converters = Converting::new(&config.converters)?;
    Ok(TaskLoop {
        name,
        config,
        converters,
        transforms,
        source,
        plugin: PluginSlot { instance, metrics: spec.metrics.clone() },
        dlq,
        metrics: spec.metrics,
        records: InFlight::default(),
        failed_rounds: 0,
        delivery_limit,
        last_commit: Instant::now(),
        last_tick: Instant::now(),
        last_put: Duration::ZERO,
        last_poll: Duration::ZERO,
        swaps: mpsc::channel(4),
    })
}

/// What a share task does with the locks of records held or retried for long.
fn locks_policy(renews: bool) -> &'static str {
    if renews {
        "renewed (KIP-1222): a record held or retried has its acquisition lock renewed before it runs out, \
         and keeps its delivery count"
    } else {
        "a record held or retried is flushed or released shortly before its acquisition lock runs out: the broker \
         does not renew locks (KIP-1222 needs Kafka 4.2+)"
    }
}
