//! A plugin's stderr: each line goes to `tracing` at WARN, and the last few
//! kilobytes are kept, so that a task that fails on a panic reports the
//! panic's message.

use bytes::Bytes;
use std::sync::{Arc, Mutex};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

const TAIL_BYTES: usize = 4096;

#[derive(Clone)]
pub struct OutputTail {
    task: Arc<str>,
    tail: Arc<Mutex<Vec<u8>>>,
}

impl OutputTail {
    pub fn new(task: &str) -> Self {
        OutputTail { task: task.into(), tail: Arc::default() }
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
        for line in String::from_utf8_lossy(&bytes).lines().filter(|l| !l.trim().is_empty()) {
            tracing::warn!(target: "spillway::plugin", task = &*self.task, "stderr: {line}");
        }
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
