//! Topics that are never a connector's to read, write or dead-letter into:
//! Kafka's own (`__consumer_offsets`, `__transaction_state`, every `__*`),
//! the worker's (its config and status topics: a dead-letter queue into the
//! config topic would write connector configs every worker runs) and the
//! host's (exactly-once positions and offset syncs, `spillway-*.internal`).

use super::{Asked, GrantPolicy};
use regex::Regex;
use spillway_config::Problem;

/// Names a `topics.regex` is tried against: Kafka's internal topics, and
/// one of each kind the host keeps.
const KAFKA_INTERNAL: [&str; 5] =
    ["__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata", "__remote_log_metadata"];
const HOST_INTERNAL: [&str; 2] = ["spillway-offsets.", "spillway-offset-syncs."];

/// Why `topic` is internal, if it is; `worker_topics` are the worker's own.
pub fn internal_topic(topic: &str, worker_topics: &[String]) -> Option<String> {
    let topic = topic.trim();
    if topic.starts_with("__") {
        Some(format!("{topic} is one of Kafka's internal topics"))
    } else if worker_topics.iter().any(|t| t == topic) {
        Some(format!("{topic} is the worker's own topic (its config or status storage)"))
    } else if HOST_INTERNAL.iter().any(|p| topic.starts_with(p)) && topic.ends_with(".internal") {
        Some(format!("{topic} is where the host keeps exactly-once positions or offset syncs"))
    } else {
        None
    }
}

impl GrantPolicy {
    /// The worker's own `topic`: never a connector's.
    pub fn protect_topic(&mut self, topic: &str) {
        self.worker_topics.push(topic.to_string());
    }

    pub fn worker_topics(&self) -> &[String] {
        &self.worker_topics
    }

    /// A problem on its key for each of `topics` that is internal, and for a
    /// `topics.regex` that matches any internal topic.
    pub fn check_topics(&self, topics: &Asked<&str>, regex: Option<(&str, &Regex)>) -> Vec<Problem> {
        let mut problems = Vec::new();
        for (key, topic) in topics {
            if let Some(why) = internal_topic(topic, &self.worker_topics) {
                problems
                    .push(Problem::new(*key, format!("{why}, which no connector may read, write or dead-letter into")));
            }
        }
        if let Some((key, regex)) = regex {
            let host: Vec<String> = HOST_INTERNAL.iter().map(|p| format!("{p}x.internal")).collect();
            let samples =
                KAFKA_INTERNAL.iter().map(|t| t.to_string()).chain(self.worker_topics.iter().cloned()).chain(host);
            if let Some(matched) = samples.into_iter().find(|t| regex.is_match(t)) {
                let why = internal_topic(&matched, &self.worker_topics).unwrap_or_default();
                problems.push(Problem::new(
                    key,
                    format!("matches {matched}: {why}, which no connector may read (exclude it, e.g. start with [^_])"),
                ));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_the_workers_and_the_hosts_topics_are_internal() {
        let mut policy = GrantPolicy::default();
        policy.protect_topic("connect-configs");
        let topics = vec![
            ("topics", "orders"),
            ("topics", "__consumer_offsets"),
            ("errors.deadletterqueue.topic.name", "connect-configs"),
            ("errors.deadletterqueue.topic.name", "spillway-offsets.m1.internal"),
        ];
        let problems = policy.check_topics(&topics, None);
        let got: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(got, ["topics", "errors.deadletterqueue.topic.name", "errors.deadletterqueue.topic.name"]);
        assert!(problems[1].message.contains("worker's own topic"), "{}", problems[1].message);
        for (regex, refused) in
            [(".*", true), ("_.*", true), ("connect-.*", true), ("orders|payments", false), ("[^_].*", true)]
        {
            let compiled = Regex::new(&format!("^(?:{regex})$")).unwrap();
            let problems = policy.check_topics(&Vec::new(), Some(("topics.regex", &compiled)));
            assert_eq!(!problems.is_empty(), refused, "{regex}: {problems:?}");
        }
        assert!(internal_topic("spillway-offset-syncs.m1.internal", &[]).is_some());
        assert!(internal_topic("spillway-offsets.m1", &[]).is_none());
    }
}
