//! A plugin's stderr: each line goes to `tracing` at WARN, within the
//! instance's log budget, and the last few kilobytes are kept, so that a
//! task that fails on a panic reports the panic's message.

use crate::log::{LogBudget, emit};
use bytes::Bytes;
use std::sync::{Arc, Mutex};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

const TAIL_BYTES: usize = 4096;

#[derive(Clone)]
pub struct OutputTail {
    task: Arc<str>,
    tail: Arc<Mutex<Vec<u8>>>,
    /// The line being written: a guest may write one line in pieces.
    partial: Arc<Mutex<Vec<u8>>>,
    budget: LogBudget,
}

impl OutputTail {
    pub fn new(task: &str, budget: LogBudget) -> Self {
        OutputTail { task: task.into(), tail: Arc::default(), partial: Arc::default(), budget }
    }

    /// The last lines written, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.tail.lock().unwrap()).trim().to_string()
    }
}

impl IsTerminal for OutputTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for OutputTail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        // Only WASI 0.3 guests use this; Spillway links WASI 0.2.
        Box::new(tokio::io::sink())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for OutputTail {
    async fn ready(&mut self) {}
}

impl OutputStream for OutputTail {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let task = &*self.task;
        let mut partial = self.partial.lock().unwrap();
        partial.extend_from_slice(&bytes);
        // Each whole line, and an unended one once it is longer than a line
        // may be.
        while let Some(end) = partial
            .iter()
            .position(|b| *b == b'\n')
            .or_else(|| (partial.len() > crate::log::LINE_MAX_BYTES).then_some(crate::log::LINE_MAX_BYTES))
        {
            let line: Vec<u8> = partial.drain(..end).collect();
            if partial.first() == Some(&b'\n') {
                partial.remove(0);
            }
            let line = String::from_utf8_lossy(&line);
            if !line.trim().is_empty() {
                emit(
                    &self.budget,
                    task,
                    &line,
                    |line| tracing::warn!(target: "spillway::plugin", task, "stderr: {line}"),
                );
            }
        }
        drop(partial);
        let mut tail = self.tail.lock().unwrap();
        tail.extend_from_slice(&bytes);
        let excess = tail.len().saturating_sub(TAIL_BYTES);
        tail.drain(..excess);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}
