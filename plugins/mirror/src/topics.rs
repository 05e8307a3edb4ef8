//! What becomes of each source topic, worked out the first time a task
//! meets it and kept: not copied (excluded, or a loop), or copied to its
//! target topic, which is created when missing, with its partition count.

use crate::cluster::{Source, Target};
use crate::config::Settings;
use spillway_sdk::TaskError;
use spillway_sdk::kafka::TopicEnsured;
use spillway_sdk::log;
use std::collections::HashMap;

/// Why a topic's records are accepted without being copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// `topics.exclude` matches it.
    Excluded,
    /// It came from the target cluster: copying it back would loop.
    Cycle,
}

/// A source topic as the task knows it.
#[derive(Debug)]
pub struct TopicState {
    pub source: String,
    /// Not copied, and why.
    pub skip: Option<Skip>,
    /// The target topic (empty when skipped).
    pub target: String,
    /// The target's partition count; none while unknown (a topic the broker
    /// creates on first use, or one not there yet): its records are hashed,
    /// and the count is read again on the next batch.
    pub partitions: Option<u32>,
    /// Whether the target was ensured (created, found, or left to the
    /// broker's auto-creation): then only its partition count is read again.
    ensured: bool,
    /// The batch in which the partition count was last read.
    read_in: u64,
    /// Records of this topic accepted without being copied.
    pub skipped: u64,
}

impl TopicState {
    /// The partition a record of source partition `partition` goes to:
    /// the same one when the target has it, else none (the key is hashed).
    #[inline]
    pub fn partition_for(&self, partition: i32) -> Option<i32> {
        match self.partitions {
            Some(n) if partition >= 0 && (partition as u32) < n => Some(partition),
            _ => None,
        }
    }
}

#[derive(Default)]
pub struct Topics {
    states: Vec<TopicState>,
    index: HashMap<String, usize>,
    /// Counts `put`s, so that an unknown partition count is read at most once per batch.
    batch: u64,
}

impl Topics {
    /// A new batch begins: unknown partition counts may be read again.
    pub fn next_batch(&mut self) {
        self.batch += 1;
    }

    pub fn state(&self, i: usize) -> &TopicState {
        &self.states[i]
    }

    pub fn state_mut(&mut self, i: usize) -> &mut TopicState {
        &mut self.states[i]
    }

    pub fn iter(&self) -> impl Iterator<Item = &TopicState> {
        self.states.iter()
    }

    /// The index of `topic`'s state, routed (and its target ensured) when
    /// first met, its partition count read again while unknown.
    pub fn resolve(
        &mut self,
        topic: &str,
        settings: &Settings,
        target: &mut dyn Target,
        source: &mut dyn Source,
    ) -> Result<usize, TaskError> {
        let batch = self.batch;
        if let Some(&i) = self.index.get(topic) {
            let state = &mut self.states[i];
            if state.skip.is_none() && state.partitions.is_none() && state.read_in != batch {
                locate(state, batch, settings, target, source)?;
            }
            return Ok(i);
        }
        let policy = &settings.policy;
        let skip = if settings.topics_exclude.matches(topic) {
            log::info(&format!("topic {topic} matches topics.exclude: its records are accepted and not copied"));
            Some(Skip::Excluded)
        } else if policy.is_cycle(topic) {
            log::info(&format!(
                "topic {topic} came from the target cluster: its records are accepted and not copied back (a loop)"
            ));
            Some(Skip::Cycle)
        } else {
            None
        };
        let mut state = TopicState {
            source: topic.to_string(),
            skip,
            target: if skip.is_none() { policy.remote_topic(topic) } else { String::new() },
            partitions: None,
            ensured: false,
            read_in: 0,
            skipped: 0,
        };
        if skip.is_none() {
            // On an error nothing is kept: the next batch starts over.
            locate(&mut state, batch, settings, target, source)?;
        }
        let i = self.states.len();
        self.index.insert(state.source.clone(), i);
        self.states.push(state);
        Ok(i)
    }
}

/// Reads the target topic's partition count; creates the topic when it is
/// missing and was not ensured yet.
fn locate(
    state: &mut TopicState,
    batch: u64,
    settings: &Settings,
    target: &mut dyn Target,
    source: &mut dyn Source,
) -> Result<(), TaskError> {
    state.partitions = target.partitions(&state.target)?;
    state.read_in = batch;
    if state.partitions.is_some() || state.ensured {
        return Ok(());
    }
    let Some(description) = source.describe_topic(&state.source)? else {
        log::warn(&format!(
            "topic {} is not in the source cluster (deleted?): its records go to {} unpartitioned, and the \
             topic is looked up again on the next batch",
            state.source, state.target
        ));
        return Ok(());
    };
    let configs: Vec<(String, String)> = if settings.sync_topic_configs {
        description.configs.into_iter().filter(|(name, _)| !settings.config_exclude.matches(name)).collect()
    } else {
        Vec::new()
    };
    let ensured = target.ensure_topic(&state.target, description.partitions, &configs)?;
    state.ensured = true;
    match ensured {
        TopicEnsured::Created => {
            log::info(&format!(
                "created topic {} with {} partitions and {} configs of {}",
                state.target,
                description.partitions,
                configs.len(),
                state.source
            ));
            state.partitions = Some(description.partitions);
        }
        // Another task created it meanwhile: its count, whatever it is.
        TopicEnsured::Existed => state.partitions = target.partitions(&state.target)?,
        TopicEnsured::AutoCreated => log::info(&format!(
            "topic {} is created by the broker on first use, with its defaults: records are hashed until \
             its partitions are known",
            state.target
        )),
    }
    Ok(())
}
