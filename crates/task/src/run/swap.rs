//! Hot swap: a running task moves to another version of its plugin without
//! stopping its consumer. The new instance is made and started beforehand,
//! off the task (instantiating a Python or JavaScript component takes a
//! while); the task then drains the old one (flush, acknowledge, commit)
//! between two batches and carries on with the new one. The consumer, its
//! group membership and every record it holds stay, so nothing is
//! redelivered and nothing is acknowledged twice.

use super::{Failure, TaskLoop};
use crate::in_flight::Stage;
use crate::metrics::FlushCause;
use spillway_runtime::PluginInstance;
use spillway_runtime::batch::FlushScope;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Started instances of the new builds, for one running task: of its sink
/// plugin, of its transform plugins (all of them, in the chain's order), or
/// both.
pub struct Swap {
    pub instance: Option<PluginInstance>,
    pub transforms: Option<Vec<PluginInstance>>,
    pub done: oneshot::Sender<Swapped>,
}

/// How a swap went in the task.
#[derive(Clone, Debug)]
pub struct Swapped {
    /// From the start of the drain until the new instance took over: the
    /// time no record was put.
    pub pause: Duration,
    /// Held records the old instance could not flush: they are put again,
    /// to the new instance (so some may be written twice, none lost).
    pub put_again: usize,
}

impl TaskLoop {
    /// Puts the new transform instances in place (a transform holds no
    /// records) and drains the old sink instance before the new one takes
    /// its place. Called between batches, with nothing fetched ahead.
    pub(super) async fn swap_plugin(&mut self, swap: Swap, stop: &CancellationToken) -> Result<(), Failure> {
        let Swap { instance, transforms, done } = swap;
        let started = Instant::now();
        if let Some(transforms) = transforms {
            let mut old = self.transforms.swap(transforms);
            self.transforms.interrupt_on(Some(stop));
            tracing::info!(task = self.name, "transform plugins swapped");
            tokio::spawn(async move { crate::transforms::stop_all(&mut old).await });
        }
        let Some(mut instance) = instance else {
            let _ = done.send(Swapped { pause: started.elapsed(), put_again: 0 });
            return Ok(());
        };
        if self.records.is_holding() {
            self.flush(FlushCause::Swap, FlushScope::All).await?;
        }
        let unflushed: Vec<u64> = self.records.held().map(|(id, _)| id).collect();
        for id in &unflushed {
            self.records.set_stage(*id, Stage::Waiting);
        }
        // What the old instance made durable is acknowledged before the new
        // one writes anything.
        self.commit().await?;
        instance.interrupt_on(Some(stop.clone()));
        let mut old = std::mem::replace(&mut self.plugin.instance, instance);
        old.interrupt_on(None);
        let pause = started.elapsed();
        tracing::info!(
            task = self.name,
            pause_ms = pause.as_millis() as u64,
            put_again = unflushed.len(),
            "plugin swapped"
        );
        let _ = done.send(Swapped { pause, put_again: unflushed.len() });
        if unflushed.is_empty() {
            // Off the data path: the old instance has nothing left to write.
            tokio::spawn(async move {
                if let Err(e) = old.stop().await {
                    tracing::warn!(error = %e, "the swapped-out plugin's stop failed");
                }
            });
        } else {
            // Stopping would let it write what the new instance now writes.
            tracing::warn!(task = self.name, records = unflushed.len(), "the old plugin could not flush; dropped");
        }
        Ok(())
    }
}
