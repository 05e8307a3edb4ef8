//! A target Kafka cluster that a connector was granted: the host's producer
//! to it (idempotent, and transactional for exactly-once), its admin calls,
//! and the consumer-group offsets kept in it.
//!
//! Under exactly-once (KIP-98), one transaction at a time is open per task:
//! the first send begins it, and the task commits it together with the
//! source offsets of the records the plugin accepted. Those offsets are
//! written into the *target* cluster, as records of the connector's
//! positions topic inside the same transaction (`positions.rs`), so that
//! output and position commit or abort as one; on assignment the source
//! consumer is positioned from them. A
//! failed send dooms the open transaction: nothing more is sent until the
//! task aborts it and rewinds to the last commit. A commit or abort that
//! times out (the target is unreachable) is resumed by the next call, as
//! librdkafka requires: any other transactional call would conflict. A
//! producer that fails fatally without being fenced (a target that lost
//! its producer state, say) is replaced by a new one with the same
//! transactional id, which aborts what the old one left open; the task
//! then resumes from the offsets committed in the target.

use super::positions;
use super::producer::future_record;
use anyhow::{Context, Result, anyhow, bail};
use rdkafka::ClientContext;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// A record for the target, borrowed from the plugin's call.
pub struct TargetRecord<'a> {
    pub topic: &'a str,
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(&'a str, Option<&'a [u8]>)],
    pub timestamp: Option<i64>,
}

/// Why a record or a call failed: whether trying again may help.
#[derive(Clone, Debug, PartialEq)]
pub enum SendError {
    Retriable(String),
    Fatal(String),
}

/// Source positions: the next offset to read per partition.
pub type Offsets = Vec<((String, i32), i64)>;

/// Per partition, the position committed in the target, if any.
pub type CommittedOffsets = Vec<((String, i32), Option<i64>)>;

/// What the task's transaction commit came to.
#[derive(Debug)]
pub enum TxnOutcome {
    /// These offsets (and the records sent before them) are committed:
    /// the ones asked for, or, when a timed-out commit was resumed, the
    /// ones that commit carried.
    Committed(Offsets),
    /// Aborted (a send failed, or the commit did): nothing of it is in the
    /// target, and the task must rewind to the last commit.
    Aborted(String),
    /// The commit or abort timed out; the next call resumes it. Until then
    /// nothing is sent, and the outcome of the transaction is unknown.
    Unresolved(String),
    /// The producer failed fatally and was replaced: whatever it had open
    /// is settled, but not known here, so the task must resume from the
    /// offsets committed in the target.
    Restarted(String),
}

/// Where this task's transaction stands, when exactly-once.
#[derive(Clone, Debug, Default)]
enum Txn {
    /// None open: the next send begins one.
    #[default]
    Idle,
    /// Open: sends join it.
    Open,
    /// Open, but a send failed in it: it can only be aborted.
    Doomed(String),
    /// A commit of these offsets timed out after it began; it must be
    /// resumed, with the same offsets.
    Committing { offsets: Offsets, offsets_sent: bool },
    /// An abort timed out; it must be resumed.
    Aborting(String),
    /// The producer failed fatally, not fenced: it must be replaced.
    Broken(String),
    /// Fenced by a newer instance of the task: this one is done.
    Fenced(String),
}

/// The producer's context: remembers the last error librdkafka reported,
/// which says why a call that fails only with "broker transport failure"
/// did (a wrong password, a certificate the cluster refuses).
#[derive(Clone, Default)]
struct LastError(Arc<Mutex<Option<String>>>);

impl ClientContext for LastError {
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(error = %error, reason, "the target cluster's client reported an error");
        // "All brokers are down" sums up the errors before it, which say why.
        if error.rdkafka_error_code() != Some(RDKafkaErrorCode::AllBrokersDown) {
            *self.0.lock().unwrap() = Some(reason.to_string());
        }
    }
}

impl LastError {
    /// " (last error: …)", or nothing.
    fn suffix(&self) -> String {
        self.0.lock().unwrap().as_ref().map(|reason| format!(" (last error: {reason})")).unwrap_or_default()
    }
}

type TargetProducer = FutureProducer<LastError>;

pub struct TargetCluster {
    /// Replaced, under exactly-once, when it fails fatally.
    producer: RwLock<Arc<TargetProducer>>,
    /// How to make the producer again.
    producer_config: ClientConfig,
    /// The grant's client settings, for the positions topic's readers.
    settings: Vec<(String, String)>,
    /// Partition counts without creating topics by asking.
    admin: AdminClient<DefaultClientContext>,
    /// The connector's group id: whose positions these are.
    group: String,
    /// Where exactly-once positions are kept in the target.
    positions_topic: String,
    transactional: Option<Mutex<Txn>>,
    timeout: Duration,
}

impl TargetCluster {
    /// Connects; with a `transactional_id`, also initializes transactions,
    /// which fences any older producer with the same id (an earlier
    /// instance of the same task), and makes sure the positions topic
    /// exists (compacted, `replication_factor` copies, -1: the cluster's
    /// default).
    pub fn connect(
        settings: &[(String, String)],
        group: &str,
        transactional_id: Option<&str>,
        positions_topic: &str,
        replication_factor: i32,
        timeout: Duration,
    ) -> Result<Self> {
        let ms = timeout.as_millis().to_string();
        let client = |extra: &[(&str, &str)]| {
            let mut config = ClientConfig::new();
            for (k, v) in settings {
                config.set(k, v);
            }
            // A request the target does not answer gives up within the
            // grant's timeout, as every operation on the grant does:
            // librdkafka would otherwise hold a transactional call (say, a
            // commit to a coordinator that stopped answering) for its 60 s.
            config.set("socket.timeout.ms", &ms);
            for (k, v) in extra {
                config.set(*k, *v);
            }
            config
        };
        let mut producer =
            client(&[("enable.idempotence", "true"), ("acks", "all"), ("linger.ms", "5"), ("message.timeout.ms", &ms)]);
        if let Some(id) = transactional_id {
            producer.set("transactional.id", id).set("transaction.timeout.ms", "60000");
        }
        let producer_config = producer;
        let errors = LastError::default();
        let producer: TargetProducer =
            producer_config.create_with_context(errors.clone()).context("creating the target producer")?;
        let admin: AdminClient<DefaultClientContext> =
            client(&[("allow.auto.create.topics", "false")]).create().context("creating the target's admin client")?;
        // Each client learns the cluster now and drops its bootstrap
        // connection before the task joins its group (see `Producer::connect`).
        producer
            .client()
            .fetch_metadata(None, timeout)
            .map_err(|e| anyhow!("reading the target's metadata: {e}{}", errors.suffix()))?;
        admin.inner().fetch_metadata(None, timeout).context("reading the target's metadata")?;
        let transactional = match transactional_id {
            Some(id) => {
                producer.init_transactions(timeout).map_err(|e| anyhow!("initializing transactions as {id}: {e}"))?;
                Some(Mutex::new(Txn::Idle))
            }
            None => None,
        };
        let target = TargetCluster {
            producer: RwLock::new(Arc::new(producer)),
            producer_config,
            settings: settings.to_vec(),
            admin,
            group: group.to_string(),
            positions_topic: positions_topic.to_string(),
            transactional,
            timeout,
        };
        if target.transactional.is_some() && target.has_controller() {
            // Where the cluster has no admin requests (librdkafka's mock),
            // the topic is made on first use.
            futures::executor::block_on(target.create_topic(
                positions_topic,
                1,
                replication_factor,
                &positions::topic_configs(),
            ))
            .map_err(|e| anyhow!("creating the positions topic {positions_topic}: {e:?}"))?;
        }
        Ok(target)
    }

    pub fn is_transactional(&self) -> bool {
        self.transactional.is_some()
    }

    /// Produces `records` in order and waits for each delivery, up to
    /// `until`. Under exactly-once they join the open transaction (begun
    /// here if none is), and any failure dooms it.
    pub async fn send(
        &self,
        records: &[TargetRecord<'_>],
        until: tokio::time::Instant,
    ) -> Result<Vec<Result<(i32, i64), SendError>>, SendError> {
        self.begin_if_needed()?;
        let producer = self.producer();
        let mut deliveries = Vec::with_capacity(records.len());
        let mut refused = Vec::new();
        for record in records {
            let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
            for (key, value) in record.headers {
                headers = headers.insert(Header { key, value: *value });
            }
            let mut future =
                future_record(record.topic, record.partition, record.key, record.value, headers, record.timestamp);
            // Enqueued one after another, so that order holds; a full queue
            // waits for room rather than reordering.
            loop {
                match producer.send_result(future) {
                    Ok(delivery) => {
                        deliveries.push(Some(delivery));
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        future = back;
                        if tokio::time::Instant::now() >= until {
                            return Err(self.doom(SendError::Retriable("the producer's queue stayed full".into())));
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    // Refused before it was queued (too large, say): the
                    // producer never took it, so no transaction is harmed.
                    Err((e, _)) => {
                        refused.push((deliveries.len(), classify(&e)));
                        deliveries.push(None);
                        break;
                    }
                }
            }
        }
        let mut outcomes = Vec::with_capacity(deliveries.len());
        let all = futures::future::join_all(deliveries.into_iter().flatten());
        let results = tokio::time::timeout_at(until, all)
            .await
            .map_err(|_| self.doom(SendError::Retriable("deliveries did not arrive in time".into())))?;
        let mut failure = None;
        let mut refused = refused.into_iter().peekable();
        for result in results {
            while let Some((_, e)) = refused.next_if(|(at, _)| *at == outcomes.len()) {
                outcomes.push(Err(e));
            }
            outcomes.push(match result {
                Ok(Ok(delivery)) => Ok((delivery.partition, delivery.offset)),
                Ok(Err((e, _))) => {
                    let e = classify(&e);
                    failure.get_or_insert(e.clone());
                    Err(e)
                }
                Err(_) => Err(SendError::Retriable("the producer went away".into())),
            });
        }
        outcomes.extend(refused.map(|(_, e)| Err(e)));
        if let Some(failure) = failure {
            self.doom(failure.clone());
            if let SendError::Fatal(why) = &failure
                && is_fenced_text(why)
            {
                return Err(SendError::Fatal(why.clone()));
            }
        }
        Ok(outcomes)
    }

    fn producer(&self) -> Arc<TargetProducer> {
        self.producer.read().unwrap().clone()
    }

    fn begin_if_needed(&self) -> Result<(), SendError> {
        let Some(txn) = &self.transactional else { return Ok(()) };
        let mut txn = txn.lock().unwrap();
        match &*txn {
            Txn::Open => Ok(()),
            Txn::Idle => {
                self.producer().begin_transaction().map_err(|e| {
                    let error = classify(&e);
                    if let SendError::Fatal(why) = &error {
                        *txn = if is_fenced(&e) { Txn::Fenced(why.clone()) } else { Txn::Broken(why.clone()) };
                    }
                    error
                })?;
                *txn = Txn::Open;
                Ok(())
            }
            Txn::Doomed(why) | Txn::Aborting(why) => {
                Err(SendError::Retriable(format!("the transaction is being aborted: {why}")))
            }
            Txn::Committing { .. } => {
                Err(SendError::Retriable("the last commit timed out and is being resumed".into()))
            }
            Txn::Broken(why) => Err(SendError::Retriable(format!("the producer is being replaced: {why}"))),
            Txn::Fenced(why) => Err(SendError::Fatal(why.clone())),
        }
    }

    /// A failure under exactly-once dooms the open transaction.
    fn doom(&self, error: SendError) -> SendError {
        if let Some(txn) = &self.transactional {
            let mut txn = txn.lock().unwrap();
            match &error {
                SendError::Fatal(why) if is_fenced_text(why) => *txn = Txn::Fenced(why.clone()),
                SendError::Retriable(why) | SendError::Fatal(why) if matches!(*txn, Txn::Open) => {
                    *txn = Txn::Doomed(why.clone())
                }
                _ => {}
            }
        }
        error
    }

    /// Commits the open transaction with `offsets` (the next offset to read
    /// per source partition) in the target's group coordinator, or aborts
    /// it if a send failed, or resumes a commit or abort that timed out.
    /// Blocking: call from a blocking context. `Err` means the producer can
    /// go no further (fenced): the task must end.
    pub fn commit_transaction(&self, offsets: &[((String, i32), i64)]) -> Result<TxnOutcome> {
        let Some(txn) = &self.transactional else { bail!("not a transactional target") };
        let mut txn = txn.lock().unwrap();
        match txn.clone() {
            Txn::Fenced(why) => bail!("{why}"),
            Txn::Broken(why) => self.replace_producer(&mut txn, why),
            Txn::Doomed(why) | Txn::Aborting(why) => self.abort(&mut txn, why),
            Txn::Committing { offsets, offsets_sent } => self.commit(&mut txn, offsets, offsets_sent),
            Txn::Idle if offsets.is_empty() => Ok(TxnOutcome::Committed(Vec::new())),
            Txn::Idle => {
                // Offsets alone (records accepted without output): they
                // still move only inside a transaction.
                if let Err(e) = self.producer().begin_transaction() {
                    return self.failed(&mut txn, &e);
                }
                *txn = Txn::Open;
                self.commit(&mut txn, offsets.to_vec(), false)
            }
            Txn::Open => self.commit(&mut txn, offsets.to_vec(), false),
        }
    }

    fn commit(&self, txn: &mut Txn, offsets: Offsets, mut offsets_sent: bool) -> Result<TxnOutcome> {
        let producer = self.producer();
        let mut step = || -> Result<(), KafkaError> {
            if !offsets_sent {
                // Queued into the open transaction; committing it flushes
                // them, and fails if one cannot be delivered.
                for ((topic, partition), offset) in &offsets {
                    let (key, value) = positions::record(&self.group, topic, *partition, *offset);
                    let record = FutureRecord::to(&self.positions_topic).key(&key).payload(&value);
                    producer.send_result(record).map_err(|(e, _)| e)?;
                }
            }
            offsets_sent = true;
            producer.commit_transaction(self.timeout)
        };
        match step() {
            Ok(()) => {
                *txn = Txn::Idle;
                Ok(TxnOutcome::Committed(offsets))
            }
            Err(e) if is_fenced(&e) || is_fatal(&e) => self.failed(txn, &e),
            Err(e) if is_retriable(&e) => {
                let why = format!("committing the transaction timed out, resuming it later: {e}");
                *txn = Txn::Committing { offsets, offsets_sent };
                Ok(TxnOutcome::Unresolved(why))
            }
            Err(e) => self.abort(txn, format!("committing the transaction: {e}")),
        }
    }

    fn abort(&self, txn: &mut Txn, why: String) -> Result<TxnOutcome> {
        match self.producer().abort_transaction(self.timeout) {
            Ok(()) => {
                *txn = Txn::Idle;
                Ok(TxnOutcome::Aborted(why))
            }
            Err(e) if is_fenced(&e) || is_fatal(&e) => self.failed(txn, &e),
            Err(e) => {
                let unresolved = format!("{why}; aborting did not finish, resuming it later: {e}");
                *txn = Txn::Aborting(why);
                Ok(TxnOutcome::Unresolved(unresolved))
            }
        }
    }

    /// A fatal error: fenced ends the task; anything else replaces the
    /// producer (now, or on a later call if the target is unreachable).
    fn failed(&self, txn: &mut Txn, e: &KafkaError) -> Result<TxnOutcome> {
        if is_fenced(e) {
            let why = format!(
                "fenced: another instance of this task took over its transactional id, so this one stops writing ({e})"
            );
            *txn = Txn::Fenced(why.clone());
            bail!(why);
        }
        self.replace_producer(txn, format!("the transactional producer failed: {e}"))
    }

    /// A new producer with the same transactional id: initializing it
    /// settles whatever the old one left open (and fences the old one).
    fn replace_producer(&self, txn: &mut Txn, why: String) -> Result<TxnOutcome> {
        let fresh: TargetProducer =
            self.producer_config.create_with_context(LastError::default()).context("creating the target producer")?;
        match fresh.init_transactions(self.timeout) {
            Ok(()) => {
                tracing::warn!(why, "replaced the transactional producer");
                *self.producer.write().unwrap() = Arc::new(fresh);
                *txn = Txn::Idle;
                Ok(TxnOutcome::Restarted(why))
            }
            Err(e) if is_fenced(&e) => {
                *txn = Txn::Fenced(format!("fenced while replacing the producer: {e}"));
                bail!("fenced while replacing the producer after {why}: {e}")
            }
            Err(e) => {
                *txn = Txn::Broken(why.clone());
                Ok(TxnOutcome::Unresolved(format!("{why}; replacing the producer did not finish, retrying: {e}")))
            }
        }
    }

    /// The positions committed in the target for `partitions`: where
    /// exactly-once consumption resumes. Tried again until `patience` has
    /// passed, since the task cannot go on without them: read right after
    /// the target came back, the first tries may fail. Blocking.
    pub fn committed(&self, partitions: &[(String, i32)], patience: Duration) -> Result<CommittedOffsets> {
        let deadline = std::time::Instant::now() + patience;
        let positions = loop {
            match positions::read(&self.settings, &self.positions_topic, &self.group, self.timeout) {
                Ok(positions) => break positions,
                Err(e) if std::time::Instant::now() < deadline => {
                    tracing::warn!(error = ?e, "reading positions from the target failed; trying again");
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => bail!("reading positions from the target's {}: {e:?}", self.positions_topic),
            }
        };
        Ok(partitions.iter().map(|tp| (tp.clone(), positions.get(tp).copied())).collect())
    }

    /// The partition count of `topic`; `None` when it does not exist.
    /// Blocking.
    pub fn partitions(&self, topic: &str) -> Result<Option<u32>, SendError> {
        let metadata = self
            .admin
            .inner()
            .fetch_metadata(Some(topic), self.timeout)
            .map_err(|e| SendError::Retriable(format!("reading the target's metadata: {e}")))?;
        let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else { return Ok(None) };
        match found.error() {
            None => Ok(Some(found.partitions().len() as u32)),
            Some(code) => match RDKafkaErrorCode::from(code) {
                RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic => Ok(None),
                other => Err(SendError::Retriable(format!("the target's metadata for {topic}: {other}"))),
            },
        }
    }

    /// Creates `topic` unless it exists, with `replication_factor` copies
    /// (-1: the cluster's default). `Ok(None)` when the cluster has no
    /// CreateTopics: the topic is then made on first use.
    pub async fn create_topic(
        &self,
        topic: &str,
        partitions: u32,
        replication_factor: i32,
        configs: &[(String, String)],
    ) -> Result<Option<bool>, SendError> {
        let mut new = NewTopic::new(topic, partitions as i32, TopicReplication::Fixed(replication_factor));
        for (k, v) in configs {
            new = new.set(k, v);
        }
        let options = AdminOptions::new().operation_timeout(Some(Timeout::After(self.timeout)));
        let results = match self.admin.create_topics([&new], &options).await {
            Ok(results) => results,
            Err(e) => return Err(SendError::Retriable(format!("creating {topic}: {e}"))),
        };
        match results.into_iter().next() {
            Some(Ok(_)) => Ok(Some(true)),
            Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(Some(false)),
            Some(Err((_, RDKafkaErrorCode::UnsupportedVersion | RDKafkaErrorCode::InvalidRequest))) => Ok(None),
            Some(Err((_, code))) if code.to_string().contains("not supported") => Ok(None),
            Some(Err((_, code))) => Err(SendError::Fatal(format!("creating {topic}: {code}"))),
            None => Err(SendError::Retriable(format!("creating {topic}: no answer"))),
        }
    }

    /// Whether the cluster takes admin requests. Blocking.
    pub fn has_controller(&self) -> bool {
        serves_admin_requests(self.admin.inner(), self.timeout)
    }

    /// Commits `offsets` for `group` in the target, as a consumer outside
    /// the group would (generation -1): the broker refuses while the group
    /// has members. Blocking.
    pub fn commit_group_offsets(
        settings: &[(String, String)],
        group: &str,
        offsets: &[((String, i32), i64)],
    ) -> Result<(), SendError> {
        let mut config = ClientConfig::new();
        for (k, v) in settings {
            config.set(k, v);
        }
        let consumer: BaseConsumer = config
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .map_err(|e| SendError::Fatal(format!("a client for group {group}: {e}")))?;
        let list = offset_list(offsets).map_err(|e| SendError::Fatal(e.to_string()))?;
        consumer
            .commit(&list, CommitMode::Sync)
            .map_err(|e| SendError::Retriable(format!("committing for {group}: {e}")))
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// Whether a cluster's controller is one of its brokers: only then does it
/// take admin requests (CreateTopics, DescribeConfigs). librdkafka's mock
/// names a controller that is none of its brokers, serves neither, and
/// makes topics on first use; asking it only times out. Blocking.
pub fn serves_admin_requests<C: rdkafka::ClientContext>(
    client: &rdkafka::client::Client<C>,
    timeout: Duration,
) -> bool {
    let Ok(metadata) = client.fetch_metadata(None, timeout) else { return true };
    // SAFETY: the client pointer is valid for as long as `client` lives.
    let controller = unsafe { rdkafka::bindings::rd_kafka_controllerid(client.native_ptr(), 1000) };
    metadata.brokers().iter().any(|b| b.id() == controller)
}

fn is_fenced(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::ProducerFenced | RDKafkaErrorCode::InvalidProducerEpoch | RDKafkaErrorCode::Fenced)
    )
}

fn is_fenced_text(why: &str) -> bool {
    why.contains("fenced")
}

fn is_fatal(e: &KafkaError) -> bool {
    match e {
        KafkaError::Transaction(err) => err.is_fatal(),
        _ => false,
    }
}

/// A timed-out transactional call, which the same call resumes.
fn is_retriable(e: &KafkaError) -> bool {
    match e {
        KafkaError::Transaction(err) => err.is_retriable() && !err.txn_requires_abort(),
        _ => false,
    }
}

/// The list librdkafka takes for positions (commits, transactions).
pub fn offset_list(offsets: &[((String, i32), i64)]) -> Result<TopicPartitionList, KafkaError> {
    let mut list = TopicPartitionList::new();
    for ((topic, partition), offset) in offsets {
        list.add_partition_offset(topic, *partition, Offset::Offset(*offset))?;
    }
    Ok(list)
}

/// Whether a produce failure may pass on another try.
fn classify(e: &KafkaError) -> SendError {
    use RDKafkaErrorCode as C;
    let code = e.rdkafka_error_code();
    if is_fenced(e) {
        return SendError::Fatal(format!(
            "fenced: another instance of this task took over its transactional id, so this one stops writing ({e})"
        ));
    }
    match code {
        Some(
            C::MessageSizeTooLarge
            | C::InvalidMessageSize
            | C::InvalidRecord
            | C::TopicAuthorizationFailed
            | C::InvalidTopic
            | C::UnknownPartition
            | C::InvalidPartitions,
        ) => SendError::Fatal(e.to_string()),
        _ if is_fatal(e) => SendError::Fatal(e.to_string()),
        _ => SendError::Retriable(e.to_string()),
    }
}

impl TargetCluster {
    /// Queues a record without waiting for it (offset syncs): under
    /// exactly-once it joins the open transaction.
    pub fn send_detached(&self, topic: &str, key: &[u8], value: &[u8]) {
        let record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).key(key).payload(value);
        if let Err((e, _)) = self.producer().send_result(record) {
            tracing::debug!(topic, error = %e, "an offset sync was not queued");
        }
    }
}
