//! MirrorMaker 2's replication policies: what a source topic is called in
//! the target, and which topics are already mirrors of the target (cycles).

/// `replication.policy.class`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// `DefaultReplicationPolicy`: `<source alias><separator><topic>`.
    Default { source_alias: String, target_alias: String, separator: String },
    /// `IdentityReplicationPolicy`: the same name; cycles cannot be seen.
    Identity,
}

impl Policy {
    /// The target topic of `topic` (MM2's `formatRemoteTopic`).
    pub fn remote_topic(&self, topic: &str) -> String {
        match self {
            Policy::Default { source_alias, separator, .. } => {
                let mut name = String::with_capacity(source_alias.len() + separator.len() + topic.len());
                name.push_str(source_alias);
                name.push_str(separator);
                name.push_str(topic);
                name
            }
            Policy::Identity => topic.to_string(),
        }
    }

    /// Whether `topic` came from the target cluster, directly or through
    /// other mirrors: an alias of its upstream chain is the target's (MM2's
    /// `isCycle`). `target.us.orders` and, with target alias `target`,
    /// `us.target.orders` are; `orders` and `us.orders` are not. Never
    /// under the identity policy, whose names say nothing of where a topic
    /// came from.
    pub fn is_cycle(&self, topic: &str) -> bool {
        match self {
            Policy::Default { target_alias, separator, .. } => {
                let mut rest = topic;
                // Every alias but the last segment (the topic's own name).
                while let Some((alias, upstream)) = rest.split_once(separator.as_str()) {
                    if alias == target_alias {
                        return true;
                    }
                    rest = upstream;
                }
                false
            }
            Policy::Identity => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default(separator: &str) -> Policy {
        Policy::Default { source_alias: "us".into(), target_alias: "eu".into(), separator: separator.into() }
    }

    #[test]
    fn remote_topics_are_prefixed_by_the_source_alias_and_separator() {
        assert_eq!(default(".").remote_topic("orders"), "us.orders");
        assert_eq!(default("__").remote_topic("orders.v1"), "us__orders.v1");
        assert_eq!(Policy::Identity.remote_topic("orders"), "orders");
    }

    #[test]
    fn cycles_are_topics_whose_upstream_chain_names_the_target() {
        let p = default(".");
        assert!(p.is_cycle("eu.orders"));
        assert!(p.is_cycle("ap.eu.orders"));
        assert!(p.is_cycle("ap.ca.eu.orders"));
        assert!(!p.is_cycle("orders"));
        assert!(!p.is_cycle("eu"), "a topic's own name is no alias");
        assert!(!p.is_cycle("ap.orders.eu"));
        assert!(!p.is_cycle("europe.orders"));
        let p = default("__");
        assert!(p.is_cycle("eu__orders"));
        assert!(!p.is_cycle("eu.orders"));
        assert!(!Policy::Identity.is_cycle("eu.orders"));
    }
}
