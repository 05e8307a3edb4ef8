//! `spillway:kafka/source`: the cluster the connector consumes from, read
//! only, and only as far as the connector's own topics go: their
//! descriptions (to recreate them in a target) and consumer groups'
//! committed offsets on them (to translate those).

use super::bindings::spillway::kafka::producer::{GroupOffset, TopicDescription};
use super::bindings::spillway::kafka::source::Host;
use super::{KafkaCtx, key};
use crate::errors::Error;
use crate::op;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use spillway_kafka::clients::{ClusterAccess, Role};
use std::sync::Arc;
use std::time::Duration;

/// Who a task is, and what of the source cluster its connector reads: set
/// by the task when it instantiates its plugin.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskScope {
    pub connector: String,
    pub task: u32,
    /// Where exactly-once source positions are kept in the target cluster
    /// (`connect-<connector>`), and the group whose offsets a plugin may
    /// not set there.
    pub offsets_group: String,
    /// The source (worker) cluster, with the connector's `admin.override.*`.
    pub source: ClusterAccess,
    pub topics: Vec<String>,
    /// `topics.regex`, when the connector subscribes by pattern.
    pub topics_regex: Option<String>,
    /// The worker's own topics, which no grant may write.
    pub worker_topics: Vec<String>,
}

impl TaskScope {
    /// Stable per task, so that a restarted or duplicated instance of the
    /// same task fences the older one.
    pub fn transactional_id(&self) -> String {
        format!("spillway-{}-{}", self.connector, self.task)
    }

    /// Which topics the connector reads: its list, or its pattern.
    fn reads(&self) -> impl Fn(&str) -> bool + '_ {
        let pattern = self.topics_regex.as_deref().and_then(|p| regex::Regex::new(&format!("^(?:{p})$")).ok());
        move |topic| self.topics.iter().any(|t| t == topic) || pattern.as_ref().is_some_and(|p| p.is_match(topic))
    }
}

/// Clients of the source cluster, made on first use.
pub(super) struct SourceCluster {
    admin: AdminClient<DefaultClientContext>,
    access: ClusterAccess,
}

const TIMEOUT: Duration = Duration::from_secs(10);
const POLICY: op::OpPolicy = op::OpPolicy { timeout: TIMEOUT, retries: 2 };

impl KafkaCtx {
    pub(super) fn source_cluster(&mut self) -> Result<(Arc<SourceCluster>, TaskScope), Error> {
        let Some(scope) = self.scope.clone() else {
            return Err(Error::fatal("the source cluster can be read only by a running task"));
        };
        if self.grants.is_empty() {
            return Err(Error::fatal("reading the source cluster needs a kafka grant (plugin.grant.kafka.<name>.*)"));
        }
        if let Some(source) = &self.source {
            return Ok((source.clone(), scope));
        }
        let admin = scope
            .source
            .rdkafka(Role::Admin)
            .set("allow.auto.create.topics", "false")
            .create()
            .map_err(|e| Error::retriable(format!("a client of the source cluster: {e}")))?;
        let source = Arc::new(SourceCluster { admin, access: scope.source.clone() });
        self.source = Some(source.clone());
        Ok((source, scope))
    }

    async fn on_source<T: Send + 'static>(
        &mut self,
        op: &'static str,
        work: impl Fn(&SourceCluster, &TaskScope) -> Result<T, Error> + Send + Sync + Clone + 'static,
    ) -> Result<T, Error> {
        let (source, scope) = self.source_cluster()?;
        op::run(&self.metrics, key(op), &POLICY, &self.budget, || {
            let (work, source, scope) = (work.clone(), source.clone(), scope.clone());
            async move {
                tokio::task::spawn_blocking(move || work(&source, &scope))
                    .await
                    .map_err(|e| Error::retriable(format!("the host's task ended: {e}")))?
            }
        })
        .await
    }
}

impl SourceCluster {
    /// One metadata round trip, after which the client has dropped its
    /// bootstrap connection. Blocking.
    pub(super) fn settle(&self) {
        if let Err(e) = self.admin.inner().fetch_metadata(None, TIMEOUT) {
            tracing::debug!(error = %e, "the source cluster's metadata");
        }
    }

    fn partitions(&self, topic: &str) -> Result<Option<u32>, Error> {
        let metadata = self
            .admin
            .inner()
            .fetch_metadata(Some(topic), TIMEOUT)
            .map_err(|e| Error::retriable(format!("reading the source's metadata: {e}")))?;
        Ok(metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
            .map(|t| t.partitions().len() as u32))
    }

    /// The topic's non-default configs; empty where the broker has no
    /// DescribeConfigs (librdkafka's mock).
    fn configs(&self, topic: &str) -> Vec<(String, String)> {
        if !spillway_kafka::target::serves_admin_requests(self.admin.inner(), TIMEOUT) {
            tracing::debug!(topic, "the source cluster takes no admin requests: no topic configs to copy");
            return Vec::new();
        }
        let options = AdminOptions::new().request_timeout(Some(rdkafka::util::Timeout::After(TIMEOUT)));
        let described =
            futures::executor::block_on(self.admin.describe_configs([&ResourceSpecifier::Topic(topic)], &options));
        match described.ok().and_then(|mut r| r.pop()).and_then(Result::ok) {
            Some(resource) => resource
                .entries
                .into_iter()
                .filter(|e| !e.is_default && !e.is_sensitive && !e.is_read_only)
                .filter_map(|e| Some((e.name, e.value?)))
                .collect(),
            None => {
                tracing::debug!(topic, "the source cluster did not describe the topic's configs");
                Vec::new()
            }
        }
    }

    fn group_client(&self, group: &str) -> Result<BaseConsumer, Error> {
        self.access
            .rdkafka(Role::Admin)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .map_err(|e| Error::retriable(format!("a client of the source cluster: {e}")))
    }
}

impl Host for KafkaCtx {
    async fn describe_topic(&mut self, topic: String) -> wasmtime::Result<Result<Option<TopicDescription>, Error>> {
        Ok(self
            .on_source("describe-topic", move |source, scope| {
                if !scope.reads()(&topic) {
                    return Err(Error::fatal(format!("{topic} is not one of the connector's topics")));
                }
                let Some(partitions) = source.partitions(&topic)? else { return Ok(None) };
                let configs = source.configs(&topic);
                Ok(Some(TopicDescription { name: topic.clone(), partitions, configs }))
            })
            .await)
    }

    async fn list_groups(&mut self) -> wasmtime::Result<Result<Vec<String>, Error>> {
        Ok(self
            .on_source("list-groups", |source, scope| {
                let client = source.group_client(&scope.offsets_group)?;
                let groups = client
                    .fetch_group_list(None, TIMEOUT)
                    .map_err(|e| Error::retriable(format!("listing the source cluster's groups (ListGroups): {e}")))?;
                Ok(groups.groups().iter().map(|g| g.name().to_string()).filter(|g| *g != scope.offsets_group).collect())
            })
            .await)
    }

    async fn group_offsets(&mut self, group: String) -> wasmtime::Result<Result<Vec<GroupOffset>, Error>> {
        Ok(self
            .on_source("group-offsets", move |source, scope| {
                let mut list = TopicPartitionList::new();
                let metadata = source
                    .admin
                    .inner()
                    .fetch_metadata(None, TIMEOUT)
                    .map_err(|e| Error::retriable(format!("reading the source's metadata: {e}")))?;
                let reads = scope.reads();
                for topic in metadata.topics().iter().filter(|t| reads(t.name())) {
                    for partition in topic.partitions() {
                        list.add_partition(topic.name(), partition.id());
                    }
                }
                if list.count() == 0 {
                    return Ok(Vec::new());
                }
                let committed = source
                    .group_client(&group)?
                    .committed_offsets(list, TIMEOUT)
                    .map_err(|e| Error::retriable(format!("reading {group}'s offsets: {e}")))?;
                Ok(committed
                    .elements()
                    .iter()
                    .filter_map(|e| match e.offset() {
                        Offset::Offset(offset) => {
                            Some(GroupOffset { topic: e.topic().to_string(), partition: e.partition(), offset })
                        }
                        _ => None,
                    })
                    .collect())
            })
            .await)
    }
}
