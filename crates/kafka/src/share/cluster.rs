//! What we know about the cluster: brokers, topic ids, partition leaders, and
//! one pooled connection per broker.

use super::connection::{ApiVersions, Connection};
use super::error::ShareError;
use crate::security::ClientSecurity;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    FindCoordinatorRequest, MetadataRequest, TopicName, metadata_request::MetadataRequestTopic,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// Topic ids in Metadata need v10 or later.
const MIN_METADATA_VERSION: i16 = 10;

pub struct Cluster {
    client_id: String,
    /// TLS and SASL of every connection.
    security: ClientSecurity,
    pub timeout: Duration,
    bootstrap: Vec<String>,
    pub(crate) versions: ApiVersions,
    view: Mutex<View>,
    /// Connection for Metadata and FindCoordinator, kept open: on the mock
    /// every closed connection destroys all share sessions on that broker.
    meta: tokio::sync::Mutex<Option<Arc<Connection>>>,
    pool: tokio::sync::Mutex<HashMap<i32, Arc<Connection>>>,
}

#[derive(Default)]
struct View {
    brokers: HashMap<i32, String>,
    topics: HashMap<String, TopicInfo>,
    names: HashMap<Uuid, String>,
}

struct TopicInfo {
    id: Uuid,
    leaders: HashMap<i32, i32>,
}

impl Cluster {
    /// Connect to the first bootstrap server that answers ApiVersions.
    pub async fn bootstrap(
        servers: &str,
        client_id: &str,
        timeout: Duration,
        security: &ClientSecurity,
    ) -> Result<Arc<Self>, ShareError> {
        let bootstrap: Vec<String> =
            servers.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
        if bootstrap.is_empty() {
            return Err(ShareError::Config("bootstrap_servers is empty".into()));
        }
        let mut last_err = None;
        for addr in &bootstrap {
            let attempt = async {
                let conn = Connection::connect(addr, client_id, timeout, security).await?;
                let versions = ApiVersions::fetch(&conn, timeout).await?;
                Ok::<_, ShareError>((conn, versions))
            };
            match attempt.await {
                Ok((conn, versions)) => {
                    return Ok(Arc::new(Cluster {
                        client_id: client_id.to_string(),
                        security: security.clone(),
                        timeout,
                        bootstrap: bootstrap.clone(),
                        versions,
                        view: Mutex::new(View::default()),
                        meta: tokio::sync::Mutex::new(Some(Arc::new(conn))),
                        pool: tokio::sync::Mutex::new(HashMap::new()),
                    }));
                }
                Err(e) => {
                    tracing::warn!(%addr, error = %e, "bootstrap server failed");
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.expect("at least one bootstrap server"))
    }

    /// Open a connection that nobody else uses (the coordinator's).
    pub(crate) async fn connect(&self, addr: &str) -> Result<Connection, ShareError> {
        Connection::connect(addr, &self.client_id, self.timeout, &self.security).await
    }

    /// The pooled connection to broker `node`, reconnecting if it died.
    pub(crate) async fn broker(&self, node: i32) -> Result<Arc<Connection>, ShareError> {
        let mut pool = self.pool.lock().await;
        if let Some(conn) = pool.get(&node).filter(|c| c.is_alive()) {
            return Ok(conn.clone());
        }
        let addr = self.view.lock().unwrap().brokers.get(&node).cloned();
        let addr = addr.ok_or_else(|| ShareError::Protocol(format!("unknown broker {node}")))?;
        let conn = Arc::new(self.connect(&addr).await?);
        pool.insert(node, conn.clone());
        Ok(conn)
    }

    /// Some broker of the cluster (the lowest id), once metadata is known.
    pub fn any_broker(&self) -> Option<i32> {
        self.view.lock().unwrap().brokers.keys().min().copied()
    }

    /// Close every pooled connection.
    pub async fn shutdown(&self) {
        self.pool.lock().await.clear();
        self.meta.lock().await.take();
    }

    async fn meta_conn(&self) -> Result<Arc<Connection>, ShareError> {
        let mut meta = self.meta.lock().await;
        if let Some(conn) = meta.as_ref().filter(|c| c.is_alive()) {
            return Ok(conn.clone());
        }
        let known: Vec<String> = self.view.lock().unwrap().brokers.values().cloned().collect();
        let mut last_err = None;
        for addr in known.iter().chain(&self.bootstrap) {
            match self.connect(addr).await {
                Ok(conn) => {
                    let conn = Arc::new(conn);
                    *meta = Some(conn.clone());
                    return Ok(conn);
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.expect("bootstrap list is not empty"))
    }

    /// Refresh brokers and the given topics (creating them if the broker
    /// auto-creates topics).
    pub async fn refresh(&self, topics: &[String]) -> Result<(), ShareError> {
        let names = topics
            .iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(t.clone())))))
            .collect();
        self.metadata(Some(names)).await.map(drop)
    }

    /// Refresh brokers and every topic, creating none; answers the names of
    /// the topics that are not internal (as the Java consumer leaves them
    /// out of pattern subscriptions).
    pub async fn refresh_all(&self) -> Result<Vec<String>, ShareError> {
        self.metadata(None).await
    }

    /// One Metadata request: for `topics`, or for all (`None`). Only named
    /// topics may be created: librdkafka's mock creates whatever a request
    /// names while auto-creation is allowed.
    async fn metadata(&self, topics: Option<Vec<MetadataRequestTopic>>) -> Result<Vec<String>, ShareError> {
        let version = self.versions.pick::<MetadataRequest>(12);
        if version < MIN_METADATA_VERSION {
            return Err(ShareError::Protocol(format!(
                "broker serves Metadata up to v{version}; topic ids need v{MIN_METADATA_VERSION}"
            )));
        }
        let req = MetadataRequest::default().with_allow_auto_topic_creation(topics.is_some()).with_topics(topics);
        let conn = self.meta_conn().await?;
        let reply = conn.send(&req, version, self.timeout).await?;
        let mut view = self.view.lock().unwrap();
        view.brokers = reply.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port))).collect();
        let mut known = Vec::new();
        for topic in reply.topics {
            let Some(name) = topic.name.map(|n| n.0.to_string()) else {
                continue;
            };
            if let Some(error) = ResponseError::try_from_code(topic.error_code) {
                // LEADER_NOT_AVAILABLE right after auto-creation: try again later.
                tracing::debug!(topic = %name, %error, "topic metadata not ready");
                continue;
            }
            let leaders = topic
                .partitions
                .iter()
                .filter(|p| p.error_code == 0 && p.leader_id.0 >= 0)
                .map(|p| (p.partition_index, p.leader_id.0))
                .collect();
            if !topic.is_internal {
                known.push(name.clone());
            }
            view.names.insert(topic.topic_id, name.clone());
            let id = topic.topic_id;
            view.topics.insert(name, TopicInfo { id, leaders });
        }
        Ok(known)
    }

    pub fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.view.lock().unwrap().topics.get(topic).map(|t| t.id)
    }

    pub fn topic_name(&self, id: Uuid) -> Option<String> {
        self.view.lock().unwrap().names.get(&id).cloned()
    }

    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        let view = self.view.lock().unwrap();
        view.topics.get(topic)?.leaders.get(&partition).copied()
    }

    /// Address of the group coordinator of `group`. A coordinator not
    /// available yet (a new cluster creating `__consumer_offsets`, a
    /// partition moving) is asked for again within the cluster's timeout.
    pub async fn find_coordinator(&self, group: &str) -> Result<String, ShareError> {
        let version = self.versions.pick::<FindCoordinatorRequest>(3);
        let key = StrBytes::from_string(group.to_string());
        let mut req = FindCoordinatorRequest::default().with_key_type(0);
        if version >= 4 {
            req.coordinator_keys = vec![key];
        } else {
            req.key = key;
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let conn = self.meta_conn().await?;
            let reply = conn.send(&req, version, self.timeout).await?;
            let (code, host, port) = match reply.coordinators.first() {
                Some(c) if version >= 4 => (c.error_code, c.host.clone(), c.port),
                _ => (reply.error_code, reply.host.clone(), reply.port),
            };
            let Some(e) = ShareError::broker(code, format!("FindCoordinator for {group}")) else {
                return Ok(format!("{}:{port}", host.as_str()));
            };
            if !e.coordinator_moving() || tokio::time::Instant::now() >= deadline {
                return Err(e);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
