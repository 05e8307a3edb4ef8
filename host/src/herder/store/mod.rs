//! Where the worker keeps connector configs, target states and pending
//! restart requests, behind one face: a file (standalone, the default) or a
//! compacted Kafka topic (`config.storage.topic`, Connect's config topic),
//! which outlives the worker's machine and which other workers can read.

mod file;
mod follow;
mod status;
mod topic;

use super::types::{ConfigMap, TargetState};
use crate::kafka::clients::ClusterAccess;
use anyhow::Result;
pub use file::FileStore;
use serde::{Deserialize, Serialize};
pub use status::{Status, StatusTopic, StatusView, StatusWriter, connector_key, task_key};
use std::collections::BTreeMap;
use std::path::Path;
pub use topic::{ConfigTopic, TopicStore};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredState {
    pub connectors: BTreeMap<String, StoredConnector>,
    /// KIP-745: recorded before a restart is answered, removed once done.
    #[serde(default)]
    pub restart_requests: BTreeMap<String, RestartRequest>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredConnector {
    /// As the user gave it: config-provider placeholders are kept, never
    /// the secrets they stand for.
    pub config: ConfigMap,
    pub target_state: TargetState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RestartRequest {
    pub include_tasks: bool,
    pub only_failed: bool,
}

pub enum StateStore {
    File(FileStore),
    Topic(Box<TopicStore>),
}

impl StateStore {
    /// The config topic when one is named, else the file.
    pub async fn open(file: &Path, topic: Option<&ConfigTopic>, cluster: &ClusterAccess) -> Result<Self> {
        Ok(match topic {
            Some(topic) => StateStore::Topic(Box::new(TopicStore::open(cluster, topic).await?)),
            None => StateStore::File(FileStore::new(file)),
        })
    }

    pub fn load(&self) -> Result<StoredState> {
        match self {
            StateStore::File(store) => store.load(),
            StateStore::Topic(store) => Ok(store.load()),
        }
    }

    /// Makes the change from `old` to `new` durable: synced to disk, or
    /// acknowledged by every in-sync replica of the config topic and read
    /// back from it.
    pub async fn save(&mut self, old: &StoredState, new: &StoredState) -> Result<()> {
        match self {
            StateStore::File(store) => store.save(new),
            StateStore::Topic(store) => store.save(old, new).await,
        }
    }

    /// Ticks when other workers may have changed the state (the config
    /// topic was read further); `None` for the file, which only we change.
    pub fn watch(&self) -> Option<tokio::sync::watch::Receiver<i64>> {
        match self {
            StateStore::File(_) => None,
            StateStore::Topic(store) => Some(store.watch()),
        }
    }

    /// How far the config topic has been read (0 for the file).
    pub fn read_offset(&self) -> i64 {
        match self {
            StateStore::File(_) => 0,
            StateStore::Topic(store) => store.read_offset(),
        }
    }

    /// Restart requests that other workers accepted, read since the last call.
    pub fn take_restarts(&self) -> Vec<(String, RestartRequest)> {
        match self {
            StateStore::File(_) => Vec::new(),
            StateStore::Topic(store) => store.take_restarts(),
        }
    }
}
