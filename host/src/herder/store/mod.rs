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
    /// Which version's rules the configs were stored under: 0 (absent)
    /// before share groups became opt-in, [`StoredState::FORMAT`] since.
    #[serde(default)]
    pub format: u32,
}

/// The connector key that pins a group protocol.
const GROUP_PROTOCOL: &str = "consumer.override.group.protocol";

impl StoredState {
    /// Since this format a connector without `consumer.override.group.protocol`
    /// runs on the worker's `consumer.group.protocol`, classic by default
    /// (KIP-1302); before it, on a share group.
    pub const FORMAT: u32 = 1;

    /// This state in the current format: when it was stored before share
    /// groups became opt-in and `ran_on_share` (the old default on a real
    /// broker), each connector that did not name its protocol is pinned to
    /// `share`, so that an upgrade keeps it on its share group and its
    /// position. Returns the names pinned; `None` when already current.
    pub fn upgraded(&self, ran_on_share: bool) -> Option<(StoredState, Vec<String>)> {
        if self.format >= Self::FORMAT {
            return None;
        }
        let mut upgraded = self.clone();
        upgraded.format = Self::FORMAT;
        let mut pinned = Vec::new();
        for (name, connector) in upgraded.connectors.iter_mut().filter(|_| ran_on_share) {
            if connector.config.get(GROUP_PROTOCOL).is_none_or(|v| v.trim().is_empty()) {
                connector.config.insert(GROUP_PROTOCOL.to_string(), "share".to_string());
                pinned.push(name.clone());
            }
        }
        Some((upgraded, pinned))
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::herder::types::TargetState;

    fn stored(configs: &[(&str, &[(&str, &str)])], format: u32) -> StoredState {
        let connector = |pairs: &[(&str, &str)]| StoredConnector {
            config: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            target_state: TargetState::Started,
        };
        let connectors = configs.iter().map(|(name, pairs)| (name.to_string(), connector(pairs))).collect();
        StoredState { connectors, restart_requests: BTreeMap::new(), format }
    }

    #[test]
    fn an_old_state_pins_share_where_no_protocol_was_named_and_a_current_one_is_left_alone() {
        let old = stored(
            &[("unnamed", &[]), ("blank", &[(GROUP_PROTOCOL, " ")]), ("classic", &[(GROUP_PROTOCOL, "classic")])],
            0,
        );
        let (upgraded, pinned) = old.upgraded(true).unwrap();
        assert_eq!(pinned, ["blank", "unnamed"]);
        assert_eq!(upgraded.format, StoredState::FORMAT);
        assert_eq!(upgraded.connectors["unnamed"].config[GROUP_PROTOCOL], "share");
        assert_eq!(upgraded.connectors["blank"].config[GROUP_PROTOCOL], "share");
        assert_eq!(upgraded.connectors["classic"].config[GROUP_PROTOCOL], "classic");
        assert!(upgraded.upgraded(true).is_none(), "once");

        // The embedded broker ran everything on classic groups already.
        let (upgraded, pinned) = old.upgraded(false).unwrap();
        assert!(pinned.is_empty());
        assert_eq!(upgraded.connectors, old.connectors);
        assert!(stored(&[("new", &[])], StoredState::FORMAT).upgraded(true).is_none());
    }

    #[test]
    fn a_file_written_before_the_format_reads_as_format_zero() {
        let old: StoredState = serde_json::from_str(r#"{"connectors": {}, "restart_requests": {}}"#).unwrap();
        assert_eq!(old.format, 0);
    }
}
