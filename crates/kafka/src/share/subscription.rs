//! What a member subscribes to: topics by name, or every topic whose whole
//! name matches a pattern (Connect's `topics.regex`). A ShareGroupHeartbeat
//! carries topic names only, so a pattern is matched here, against the
//! cluster's metadata: at the join, then every `refresh`.

use super::ShareConsumerConfig;
use super::cluster::Cluster;
use super::error::ShareError;
use regex::Regex;
use std::time::Duration;

#[derive(Clone, Debug)]
pub(crate) enum Subscription {
    Topics(Vec<String>),
    Pattern { regex: Regex, refresh: Option<Duration> },
}

impl Subscription {
    pub fn of(config: &ShareConsumerConfig) -> Result<Self, ShareError> {
        match (&config.topics_regex, config.topics.is_empty()) {
            (None, false) => Ok(Subscription::Topics(config.topics.clone())),
            (Some(pattern), true) => {
                // Anchored as Connect matches: the whole name.
                let regex = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| ShareError::Config(format!("topics_regex: {e}")))?;
                Ok(Subscription::Pattern { regex, refresh: config.topics_refresh })
            }
            (Some(_), false) => Err(ShareError::Config("topics and topics_regex exclude each other".into())),
            (None, true) => Err(ShareError::Config("topics or topics_regex is required".into())),
        }
    }

    /// The names to subscribe to now, sorted. A pattern is matched against
    /// metadata of all topics, which creates none.
    pub async fn topics(&self, cluster: &Cluster) -> Result<Vec<String>, ShareError> {
        match self {
            Subscription::Topics(topics) => Ok(topics.clone()),
            Subscription::Pattern { regex, .. } => {
                let mut matching: Vec<String> =
                    cluster.refresh_all().await?.into_iter().filter(|t| regex.is_match(t)).collect();
                matching.sort();
                Ok(matching)
            }
        }
    }

    /// Refresh the metadata that fetching needs: of the named topics, or of
    /// all topics for a pattern.
    pub async fn refresh_metadata(&self, cluster: &Cluster) -> Result<(), ShareError> {
        match self {
            Subscription::Topics(topics) => cluster.refresh(topics).await,
            Subscription::Pattern { .. } => cluster.refresh_all().await.map(drop),
        }
    }

    /// How often the subscribed names may change: for a pattern only.
    pub fn refresh(&self) -> Option<Duration> {
        match self {
            Subscription::Topics(_) => None,
            Subscription::Pattern { refresh, .. } => *refresh,
        }
    }
}
