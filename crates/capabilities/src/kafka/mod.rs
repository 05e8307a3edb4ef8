//! `spillway:kafka`: Kafka clusters the operator granted, produced to by
//! the host (rdkafka), and a read-only view of the cluster the connector
//! consumes from.
//!
//! The grant (`plugin.grant.kafka.<name>.*`, [`grant`]) holds the target's
//! address and client settings; the plugin hands over records and learns,
//! per record, where it landed, so that it accepts a source record only once
//! the target has it. Under `exactly.once`, sends join the task's
//! transaction ([`TargetCluster`]), which the task commits with the source
//! offsets. The host writes offset syncs ([`syncs`]) as records land, for
//! translating consumer-group offsets.

mod grant;
mod source;
mod syncs;

pub use grant::KafkaGrant;
pub use source::TaskScope;

use super::errors::Error;
use super::op::{self, CallBudget, CapabilityMetrics, OpKey, OpPolicy};
use super::pending::{Pending, room};
use super::{Capability, ContextsView, GrantKind};
use bindings::spillway::kafka::producer::{
    Delivered, Delivery, GroupOffset, Host as ProducerHost, HostCluster, HostPendingSend, OffsetSync, OutputRecord,
    TopicEnsured,
};
use spillway_kafka::target::{SendError, TargetCluster, TargetRecord};
use spillway_policy::InstanceBounds;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use syncs::{SourceIndex, SyncWriter};
use tokio::sync::Semaphore;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

pub const PACKAGE: &str = "spillway:kafka";
pub const VERSION: &str = "0.1.0";
/// The grants' capability segment and the metrics' label.
const NAME: &str = "kafka";

pub const CAPABILITY: Capability = Capability {
    package: PACKAGE,
    version: VERSION,
    interfaces: &["producer", "source"],
    grant: Some(GrantKind {
        name: NAME,
        setting_keys: grant::setting_keys,
        parse: grant::parse,
        check: grant::check,
        reach: grant::reach,
        granted: |grants| !grants.kafka.is_empty(),
    }),
};

pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "spillway:kafka/imports",
        imports: { default: async | trappable },
        with: {
            "spillway:types/errors": crate::errors::bindings::spillway::types::errors,
            "spillway:kafka/producer.cluster": super::OpenCluster,
            "spillway:kafka/producer.pending-send": super::PendingSend,
        },
    });
}

/// A send begun in the background: the resource behind `pending-send`.
pub type PendingSend = Pending<Vec<Delivery>>;

/// A granted cluster, opened once per plugin instance and shared by its
/// resources and (under exactly-once) the task, which commits its
/// transaction.
pub struct GrantedCluster {
    pub target: Arc<TargetCluster>,
    grant: KafkaGrant,
    syncs: SyncWriter,
}

/// The resource behind `cluster`.
pub struct OpenCluster {
    cluster: Arc<GrantedCluster>,
}

/// The capability's state in one plugin instance.
pub struct KafkaCtx {
    grants: BTreeMap<String, KafkaGrant>,
    scope: Option<TaskScope>,
    opened: HashMap<String, Arc<GrantedCluster>>,
    /// Where the records of recent `put`s came from, by id.
    index: SourceIndex,
    source: Option<Arc<source::SourceCluster>>,
    table: ResourceTable,
    budget: CallBudget,
    metrics: Arc<CapabilityMetrics>,
    /// Room for sends going on in the host (`begin-send`), each holding its
    /// records until the cluster acknowledges them: `work_in_flight` of them.
    sends: Arc<Semaphore>,
    sends_in_flight: usize,
}

impl KafkaCtx {
    pub fn new(
        grants: &BTreeMap<String, KafkaGrant>,
        scope: Option<&TaskScope>,
        bounds: &InstanceBounds,
        budget: CallBudget,
        metrics: Arc<CapabilityMetrics>,
    ) -> Self {
        KafkaCtx {
            grants: grants.clone(),
            scope: scope.cloned(),
            opened: HashMap::new(),
            index: SourceIndex::default(),
            source: None,
            table: ResourceTable::new(),
            budget,
            metrics,
            sends: Arc::new(Semaphore::new(bounds.work_in_flight)),
            sends_in_flight: bounds.work_in_flight,
        }
    }

    /// Refuses a write into an internal topic (Kafka's, the worker's, the
    /// host's positions and offset syncs), on any granted cluster: one that
    /// is the worker's own must not have its state written by a plugin.
    fn writable<'t>(&self, mut topics: impl Iterator<Item = &'t str>) -> Result<(), Error> {
        let worker_topics = self.scope.as_ref().map_or(&[][..], |s| s.worker_topics.as_slice());
        match topics.find_map(|topic| spillway_policy::internal_topic(topic, worker_topics)) {
            Some(why) => Err(Error::fatal(format!("{why}, which no plugin may write"))),
            None => Ok(()),
        }
    }

    /// Whether any grant is given: only then does a `put` note its records.
    pub fn is_granted(&self) -> bool {
        !self.grants.is_empty()
    }

    /// Remembers where the records of a batch come from, so that a send
    /// naming them can record offset syncs.
    pub fn note_batch<'r>(&mut self, records: impl Iterator<Item = (u64, &'r str, i32, i64)>) {
        self.index.note(records);
    }

    /// Opens every granted cluster and the source's clients now, before
    /// the task joins its group (a share group on librdkafka's mock loses
    /// its sessions whenever any connection to the broker closes, as a new
    /// client's bootstrap connection does), and returns the exactly-once
    /// grant's cluster, whose transaction the task commits.
    pub async fn connect(&mut self) -> anyhow::Result<Option<Arc<TargetCluster>>> {
        if self.grants.is_empty() {
            return Ok(None);
        }
        let names: Vec<String> = self.grants.keys().cloned().collect();
        let mut exactly_once = None;
        for name in names {
            let cluster = self.open_grant(&name).await.map_err(|e| anyhow::anyhow!("{}", e.message()))?;
            if cluster.grant.exactly_once {
                exactly_once = Some(cluster.target.clone());
            }
        }
        let (source, _) = self.source_cluster().map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        tokio::task::spawn_blocking(move || source.settle()).await?;
        Ok(exactly_once)
    }

    async fn open_grant(&mut self, name: &str) -> Result<Arc<GrantedCluster>, Error> {
        if let Some(open) = self.opened.get(name) {
            return Ok(open.clone());
        }
        let Some(grant) = self.grants.get(name).cloned() else {
            let granted: Vec<&str> = self.grants.keys().map(String::as_str).collect();
            return Err(Error::fatal(format!(
                "no kafka grant named '{name}' (plugin.grant.kafka.{name}.bootstrap.servers); this connector grants: {}",
                if granted.is_empty() { "none".to_string() } else { granted.join(", ") }
            )));
        };
        let Some(scope) = self.scope.clone() else {
            return Err(Error::fatal("kafka clusters can be opened only by a running task"));
        };
        let settings = grant.client_settings();
        let transactional_id = grant.exactly_once.then(|| scope.transactional_id());
        let timeout = grant.policy.timeout;
        let group = scope.offsets_group.clone();
        let (positions, replication) = (grant.positions_topic(&scope.connector), grant.replication_factor);
        let target = tokio::task::spawn_blocking(move || {
            TargetCluster::connect(&settings, &group, transactional_id.as_deref(), &positions, replication, timeout)
        })
        .await
        .map_err(|e| Error::retriable(format!("opening the kafka grant '{name}': {e}")))?
        .map_err(|e| Error::retriable(format!("opening the kafka grant '{name}': {e:#}")))?;
        let syncs = SyncWriter::new(grant.offset_syncs_topic(&scope.connector), scope.connector.clone());
        let cluster = Arc::new(GrantedCluster { target: Arc::new(target), grant, syncs });
        self.opened.insert(name.to_string(), cluster.clone());
        Ok(cluster)
    }

    fn cluster(&self, resource: &Resource<OpenCluster>) -> wasmtime::Result<Arc<GrantedCluster>> {
        Ok(self.table.get(resource)?.cluster.clone())
    }

    /// The end of a send: the grant's timeout, within the plugin call's.
    fn until(&self, policy: &OpPolicy) -> tokio::time::Instant {
        let own = tokio::time::Instant::now() + policy.timeout;
        self.budget.until().map_or(own, |until| until.min(own))
    }

    /// Runs blocking client work under the grant's policy, off the
    /// runtime's threads.
    fn blocking<T: Send + 'static>(
        &self,
        cluster: &GrantedCluster,
        op: &'static str,
        work: impl Fn() -> Result<T, SendError> + Send + Sync + Clone + 'static,
    ) -> impl Future<Output = Result<T, Error>> + Send + 'static {
        let (metrics, budget, policy) = (self.metrics.clone(), self.budget.clone(), cluster.grant.policy.clone());
        async move { run_blocking(&metrics, &budget, &policy, op, work).await }
    }
}

async fn run_blocking<T: Send + 'static>(
    metrics: &CapabilityMetrics,
    budget: &CallBudget,
    policy: &OpPolicy,
    op: &'static str,
    work: impl Fn() -> Result<T, SendError> + Send + Sync + Clone + 'static,
) -> Result<T, Error> {
    {
        op::run(metrics, key(op), policy, budget, || {
            let work = work.clone();
            async move {
                tokio::task::spawn_blocking(work)
                    .await
                    .map_err(|e| Error::retriable(format!("the host's task ended: {e}")))?
                    .map_err(to_error)
            }
        })
        .await
    }
}

fn key(op: &'static str) -> OpKey {
    OpKey { capability: NAME, op }
}

fn to_error(e: SendError) -> Error {
    match e {
        SendError::Retriable(why) => Error::retriable(why),
        SendError::Fatal(why) => Error::fatal(why),
    }
}

/// Sends `records` and writes offset syncs for those that name their
/// source record; the work of `send` and `begin-send`.
async fn send(
    cluster: Arc<GrantedCluster>,
    records: Vec<OutputRecord>,
    sources: Vec<Option<syncs::SourceOffset>>,
    until: tokio::time::Instant,
    metrics: Arc<CapabilityMetrics>,
) -> Result<Vec<Delivery>, Error> {
    let started = std::time::Instant::now();
    type Headers<'a> = Vec<(&'a str, Option<&'a [u8]>)>;
    let headers: Vec<Headers<'_>> =
        records.iter().map(|r| r.headers.iter().map(|h| (h.key.as_str(), h.value.as_deref())).collect()).collect();
    let outgoing: Vec<TargetRecord<'_>> = records
        .iter()
        .zip(&headers)
        .map(|(r, headers)| TargetRecord {
            topic: &r.topic,
            partition: r.partition,
            key: r.key.as_deref(),
            value: r.value.as_deref(),
            headers,
            timestamp: r.timestamp,
        })
        .collect();
    let bytes: usize =
        records.iter().map(|r| r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len)).sum();
    let result = cluster.target.send(&outgoing, until).await.map_err(to_error);
    let result = result.map(|outcomes| {
        cluster.syncs.record(&cluster.target, &records, &sources, &outcomes);
        outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Ok((partition, offset)) => Delivery::Delivered(Delivered { partition, offset }),
                Err(e) => Delivery::Failed(to_error(e)),
            })
            .collect()
    });
    metrics.record(key("send"), 0, started.elapsed(), &result);
    metrics.add_bytes(key("send"), bytes as u64);
    result
}

impl HostCluster for KafkaCtx {
    async fn open(&mut self, grant: String) -> wasmtime::Result<Result<Resource<OpenCluster>, Error>> {
        let cluster = match self.open_grant(&grant).await {
            Ok(cluster) => cluster,
            Err(e) => return Ok(Err(e)),
        };
        Ok(Ok(self.table.push(OpenCluster { cluster })?))
    }

    async fn send(
        &mut self,
        cluster: Resource<OpenCluster>,
        records: Vec<OutputRecord>,
    ) -> wasmtime::Result<Result<Vec<Delivery>, Error>> {
        let cluster = self.cluster(&cluster)?;
        if let Err(refused) = self.writable(records.iter().map(|r| r.topic.as_str())) {
            return Ok(Err(refused));
        }
        let until = self.until(&cluster.grant.policy);
        let sources = self.index.lookup(&records);
        Ok(send(cluster, records, sources, until, self.metrics.clone()).await)
    }

    async fn begin_send(
        &mut self,
        cluster: Resource<OpenCluster>,
        records: Vec<OutputRecord>,
    ) -> wasmtime::Result<Result<Resource<PendingSend>, Error>> {
        let cluster = self.cluster(&cluster)?;
        if let Err(refused) = self.writable(records.iter().map(|r| r.topic.as_str())) {
            return Ok(Err(refused));
        }
        let permit = match room(&self.sends, &self.budget, self.sends_in_flight, "sends").await {
            Ok(permit) => permit,
            Err(e) => return Ok(Err(e)),
        };
        // Outside the plugin call: the grant's own timeout bounds it.
        let until = tokio::time::Instant::now() + cluster.grant.policy.timeout;
        let sources = self.index.lookup(&records);
        let metrics = self.metrics.clone();
        let task = tokio::spawn(async move {
            let sent = send(cluster, records, sources, until, metrics).await;
            drop(permit);
            sent
        });
        Ok(Ok(self.table.push(Pending::new(task))?))
    }

    async fn partitions(
        &mut self,
        cluster: Resource<OpenCluster>,
        topic: String,
    ) -> wasmtime::Result<Result<Option<u32>, Error>> {
        let cluster = self.cluster(&cluster)?;
        let target = cluster.target.clone();
        Ok(self.blocking(&cluster, "partitions", move || target.partitions(&topic)).await)
    }

    async fn ensure_topic(
        &mut self,
        cluster: Resource<OpenCluster>,
        topic: String,
        partitions: u32,
        configs: Vec<(String, String)>,
    ) -> wasmtime::Result<Result<TopicEnsured, Error>> {
        let cluster = self.cluster(&cluster)?;
        if let Err(refused) = self.writable(std::iter::once(topic.as_str())) {
            return Ok(Err(refused));
        }
        let target = cluster.target.clone();
        let name = topic.clone();
        let found =
            self.blocking(&cluster, "partitions", move || Ok((target.partitions(&name)?, target.has_controller())));
        match found.await {
            Ok((Some(_), _)) => return Ok(Ok(TopicEnsured::Existed)),
            Ok((None, false)) => return Ok(Ok(TopicEnsured::AutoCreated)),
            Ok((None, true)) => {}
            Err(e) => return Ok(Err(e)),
        }
        let target = cluster.target.clone();
        let (policy, replication) = (cluster.grant.policy.clone(), cluster.grant.replication_factor);
        let created = op::run(&self.metrics, key("ensure-topic"), &policy, &self.budget, || {
            let (target, topic, configs) = (target.clone(), topic.clone(), configs.clone());
            async move { target.create_topic(&topic, partitions, replication, &configs).await.map_err(to_error) }
        })
        .await;
        Ok(created.map(|created| match created {
            Some(true) => TopicEnsured::Created,
            Some(false) => TopicEnsured::Existed,
            None => TopicEnsured::AutoCreated,
        }))
    }

    async fn offset_syncs(
        &mut self,
        cluster: Resource<OpenCluster>,
    ) -> wasmtime::Result<Result<Vec<OffsetSync>, Error>> {
        let cluster = self.cluster(&cluster)?;
        let (settings, topic, connector) =
            (cluster.grant.client_settings(), cluster.syncs.topic().to_string(), cluster.syncs.connector().to_string());
        let timeout = cluster.grant.policy.timeout;
        Ok(self.blocking(&cluster, "offset-syncs", move || syncs::read(&settings, &topic, &connector, timeout)).await)
    }

    async fn commit_group_offsets(
        &mut self,
        cluster: Resource<OpenCluster>,
        group: String,
        offsets: Vec<GroupOffset>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let cluster = self.cluster(&cluster)?;
        if group == cluster.target.group() {
            return Ok(Err(Error::fatal(format!(
                "group {group} is this connector's own: its offsets in the target are the host's"
            ))));
        }
        let settings = cluster.grant.client_settings();
        let offsets: Vec<((String, i32), i64)> =
            offsets.into_iter().map(|o| ((o.topic, o.partition), o.offset)).collect();
        Ok(self
            .blocking(&cluster, "commit-group-offsets", move || {
                TargetCluster::commit_group_offsets(&settings, &group, &offsets)
            })
            .await)
    }

    async fn drop(&mut self, cluster: Resource<OpenCluster>) -> wasmtime::Result<()> {
        self.table.delete(cluster)?;
        Ok(())
    }
}

impl HostPendingSend for KafkaCtx {
    async fn ready(&mut self, send: Resource<PendingSend>) -> wasmtime::Result<Option<Result<Vec<Delivery>, Error>>> {
        Ok(self.table.get_mut(&send)?.ready().await)
    }

    async fn wait(&mut self, send: Resource<PendingSend>) -> wasmtime::Result<Result<Vec<Delivery>, Error>> {
        let until = self.budget.until();
        Ok(self.table.get_mut(&send)?.wait(until).await)
    }

    async fn drop(&mut self, send: Resource<PendingSend>) -> wasmtime::Result<()> {
        self.table.delete(send)?;
        Ok(())
    }
}

impl ProducerHost for KafkaCtx {}

struct HasKafka;

impl HasData for HasKafka {
    type Data<'a> = &'a mut KafkaCtx;
}

fn ctx<T: ContextsView>(data: &mut T) -> &mut KafkaCtx {
    &mut data.contexts().kafka
}

/// Both of the package's interfaces at once.
pub fn add_to_linker<T: ContextsView + 'static>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    bindings::spillway::kafka::producer::add_to_linker::<T, HasKafka>(linker, ctx::<T>)?;
    bindings::spillway::kafka::source::add_to_linker::<T, HasKafka>(linker, ctx::<T>)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_plugin_writes_an_internal_topic() {
        let scope = TaskScope {
            connector: "m1".into(),
            task: 0,
            offsets_group: "connect-m1".into(),
            source: Default::default(),
            topics: vec!["orders".into()],
            topics_regex: None,
            worker_topics: vec!["connect-configs".into()],
        };
        let ctx = KafkaCtx::new(
            &BTreeMap::new(),
            Some(&scope),
            &Default::default(),
            CallBudget::default(),
            Default::default(),
        );
        assert!(ctx.writable(["orders", "us.orders"].into_iter()).is_ok());
        for topic in ["__consumer_offsets", "connect-configs", "spillway-offsets.m1.internal"] {
            let refused = ctx.writable(["orders", topic].into_iter()).unwrap_err();
            assert!(refused.message().contains(topic) && refused.message().contains("no plugin may write"), "{topic}");
        }
    }
}
