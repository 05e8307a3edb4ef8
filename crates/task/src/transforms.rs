//! The connector's transforms, run on the records of a batch after their
//! converters and before `put()`, as Connect orders them: stage by stage,
//! a built-in on each record, a transform plugin on the batch at once (one
//! call per stage, whatever the batch's size).

use super::convert::to_batch;
use super::in_flight::InFlight;
use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use spillway_capabilities::Grants;
use spillway_connector::ConnectorConfig;
use spillway_kafka::ConsumedRecord;
use spillway_runtime::bindings::Transformed as Out;
use spillway_runtime::{Plugin, PluginError, PluginInstance, Runtime};
use spillway_transforms::{Chain, Failure, Record, Step};
use std::sync::Arc;
use std::time::SystemTime;
use tokio_util::sync::CancellationToken;

/// What the chain made of a record.
pub(super) enum Transformed {
    /// Given to the plugin as the transforms left it.
    Put,
    /// A transform dropped it (Filter, a tombstone ExtractNewRecordState
    /// drops): it is done, as Connect commits a filtered record's offset.
    Dropped,
    /// A transform could not read it: rejected at TRANSFORMATION.
    Failed(Failure),
}

/// The chain as one task runs it: the config's stages, and a started
/// instance of each transform plugin among them, in the chain's order.
pub(super) struct Transforms {
    chain: Arc<Chain>,
    instances: Vec<PluginInstance>,
}

impl Transforms {
    /// Instantiates and starts `plugins`, the builds the registry picked for
    /// the chain's plugin stages, each with its stage's settings.
    pub(super) async fn start(
        runtime: &Runtime,
        config: &ConnectorConfig,
        plugins: &[Plugin],
        task: &str,
    ) -> Result<Self> {
        let instances = start_instances(runtime, config, plugins, task).await?;
        Ok(Transforms { chain: config.transforms.clone(), instances })
    }

    /// Puts `instances` (of other builds, started) in place of the running
    /// ones and gives those back: a transform holds no records, so the swap
    /// needs no drain.
    pub(super) fn swap(&mut self, instances: Vec<PluginInstance>) -> Vec<PluginInstance> {
        std::mem::replace(&mut self.instances, instances)
    }

    /// See [`PluginInstance::interrupt_on`].
    pub(super) fn interrupt_on(&mut self, token: Option<&CancellationToken>) {
        for instance in &mut self.instances {
            instance.interrupt_on(token.cloned());
        }
    }

    pub(super) async fn stop(&mut self) {
        stop_all(&mut self.instances).await;
    }

    /// Runs records `ids` through the chain and says what became of each,
    /// in `ids`' order. The survivors are given to the plugin as the chain
    /// left them. A transform plugin's call that fails (its error, a trap, a
    /// timeout) fails the task: the records stay the task's and are
    /// redelivered.
    pub(super) async fn apply(
        &mut self,
        records: &mut InFlight,
        ids: &[u64],
    ) -> Result<Vec<(u64, Transformed)>, PluginError> {
        if self.chain.is_empty() {
            return Ok(ids.iter().map(|id| (*id, Transformed::Put)).collect());
        }
        let mut live: Vec<(u64, ConsumedRecord)> =
            ids.iter().filter_map(|id| Some((*id, records.get(*id)?.as_put().clone()))).collect();
        let mut fates = Vec::with_capacity(ids.len());
        let mut instances = self.instances.iter_mut();
        for stage in self.chain.stages() {
            let fail = |message| Transformed::Failed(Failure { class: stage.class().to_string(), message });
            match stage.step() {
                Step::Builtin { transform, .. } => {
                    let mut next = Vec::with_capacity(live.len());
                    for (id, record) in live {
                        let input = as_transform_record(&record);
                        if !stage.applies_to(&input) {
                            next.push((id, record));
                            continue;
                        }
                        match transform.apply(input) {
                            Ok(Some(out)) => next.push((id, from_transform_record(out, record))),
                            Ok(None) => fates.push((id, Transformed::Dropped)),
                            Err(message) => fates.push((id, fail(message))),
                        }
                    }
                    live = next;
                }
                Step::Plugin(_) => {
                    let instance = instances.next().expect("one instance per plugin stage");
                    // A predicate reads the record as the transforms see it:
                    // made only for a stage that has one.
                    let applies: Vec<bool> = match stage.has_predicate() {
                        true => live.iter().map(|(_, r)| stage.applies_to(&as_transform_record(r))).collect(),
                        false => vec![true; live.len()],
                    };
                    let batch: Vec<_> =
                        live.iter().zip(&applies).filter(|(_, a)| **a).map(|((id, r), _)| (*id, r, None)).collect();
                    let mut outs = instance.apply(&to_batch(&batch, SystemTime::now())).await?.into_iter();
                    let mut next = Vec::with_capacity(live.len());
                    for ((id, record), applies) in live.into_iter().zip(applies) {
                        if !applies {
                            next.push((id, record));
                            continue;
                        }
                        match outs.next().expect("apply checks one answer per record") {
                            Out::Keep(out) => next.push((
                                id,
                                ConsumedRecord {
                                    topic: out.topic,
                                    timestamp: out.timestamp,
                                    key: out.key.map(Bytes::from),
                                    value: out.value.map(Bytes::from),
                                    headers: out.headers.into_iter().map(|(k, v)| (k, v.map(Bytes::from))).collect(),
                                    ..record
                                },
                            )),
                            Out::Drop => fates.push((id, Transformed::Dropped)),
                            Out::Fail(message) => fates.push((id, fail(message))),
                        }
                    }
                    live = next;
                }
            }
        }
        for (id, record) in live {
            records.put_as(id, record);
            fates.push((id, Transformed::Put));
        }
        // Ids grow with arrival: the batch's order.
        fates.sort_by_key(|(id, _)| *id);
        Ok(fates)
    }
}

/// A started instance of each of `plugins` for the plugin stages of
/// `config`'s chain, bounded by the connector's limits as its sink is.
pub async fn start_instances(
    runtime: &Runtime,
    config: &ConnectorConfig,
    plugins: &[Plugin],
    task: &str,
) -> Result<Vec<PluginInstance>> {
    let steps: Vec<_> = config.transforms.plugins().collect();
    if steps.len() != plugins.len() {
        return Err(anyhow!("{} transform plugins resolved for {} plugin stages", plugins.len(), steps.len()));
    }
    // No grants: a transform is linked with logging only. The worker's
    // per-instance bounds hold for it as for the sink.
    let grants = Grants { bounds: config.grants.bounds.clone(), ..Default::default() };
    let mut instances = Vec::with_capacity(plugins.len());
    for ((alias, step), plugin) in steps.into_iter().zip(plugins) {
        let name = format!("{task}-{alias}");
        let started = async {
            let mut instance = runtime
                .instantiate(plugin, &name, &grants, &config.limits)
                .await
                .with_context(|| format!("instantiating transform {alias} ({})", plugin.metadata.name))?;
            instance.start(&step.settings).await.map_err(|e| anyhow!("transform {alias} start: {e}"))?;
            anyhow::Ok(instance)
        };
        match started.await {
            Ok(instance) => instances.push(instance),
            Err(e) => {
                stop_all(&mut instances).await;
                return Err(e);
            }
        }
    }
    Ok(instances)
}

/// Stops each of `instances` (Connect's `close`), saying which failed.
pub async fn stop_all(instances: &mut [PluginInstance]) {
    for instance in instances {
        if let Err(e) = instance.stop().await {
            tracing::warn!(error = %e, "a transform plugin's stop failed");
        }
    }
}

fn as_transform_record(record: &ConsumedRecord) -> Record {
    Record {
        topic: record.topic.clone(),
        partition: record.partition,
        offset: record.offset,
        timestamp: record.timestamp,
        key: record.key.clone(),
        value: record.value.clone(),
        headers: record.headers.clone(),
    }
}

fn from_transform_record(out: Record, record: ConsumedRecord) -> ConsumedRecord {
    ConsumedRecord {
        topic: out.topic,
        timestamp: out.timestamp,
        key: out.key,
        value: out.value,
        headers: out.headers,
        ..record
    }
}
