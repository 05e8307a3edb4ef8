//! A plugin's stderr: each line goes to `tracing` at WARN, within the
//! instance's log budget and cut as the log capability's lines are, and the
//! last few kilobytes are kept, so that a task that fails on a panic reports
//! the panic's message.

use crate::log::{LINE_MAX_BYTES, LogBudget, emit};
use bytes::Bytes;
use std::sync::{Arc, Mutex};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

const TAIL_BYTES: usize = 4096;

#[derive(Clone)]
pub struct OutputTail {
    tail: Arc<Mutex<Vec<u8>>>,
    lines: Arc<Mutex<Lines>>,
}

impl OutputTail {
    pub fn new(task: &str, budget: LogBudget) -> Self {
        let task: Arc<str> = task.into();
        let log = move |line: &str| {
            let task = &*task;
            emit(&budget, task, line, |line| tracing::warn!(target: "spillway::plugin", task, "stderr: {line}"));
        };
        let lines = Lines::new(Box::new(log));
        OutputTail { tail: Arc::default(), lines: Arc::new(Mutex::new(lines)) }
    }

    /// The last lines written, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.tail.lock().unwrap()).trim().to_string()
    }
}

/// Splits what is written into lines and logs each: a guest may write one
/// line in pieces, or many in one write.
struct Lines {
    log: Box<dyn FnMut(&str) + Send>,
    /// The line being written, at most [`LINE_MAX_BYTES`].
    partial: Vec<u8>,
    /// Whether the line being written was logged already, cut: the rest of
    /// it, up to its end, is skipped.
    cut: bool,
}

impl Lines {
    fn new(log: Box<dyn FnMut(&str) + Send>) -> Self {
        Lines { log, partial: Vec::new(), cut: false }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (piece, ended) = match bytes.iter().position(|b| *b == b'\n') {
                Some(end) => (&bytes[..end], Some(end + 1)),
                None => (bytes, None),
            };
            if !self.cut {
                let room = LINE_MAX_BYTES - self.partial.len();
                self.partial.extend_from_slice(&piece[..piece.len().min(room)]);
                if piece.len() > room {
                    drop_split_character(&mut self.partial);
                    self.log_line();
                    self.cut = true;
                }
            }
            match ended {
                Some(next) => {
                    if !self.cut {
                        self.log_line();
                    }
                    self.cut = false;
                    bytes = &bytes[next..];
                }
                None => break,
            }
        }
    }

    /// Logs the line held, if it has anything to say. Empty lines cost no budget.
    fn log_line(&mut self) {
        let line = String::from_utf8_lossy(&self.partial);
        let line = line.trim_end_matches('\r');
        if !line.trim().is_empty() {
            (self.log)(line);
        }
        self.partial.clear();
    }
}

/// Drops the bytes of a character cut in two at the end of `bytes`.
fn drop_split_character(bytes: &mut Vec<u8>) {
    let continuations = bytes.iter().rev().take(3).take_while(|b| *b & 0xC0 == 0x80).count();
    let Some(&lead) = bytes.len().checked_sub(continuations + 1).map(|i| &bytes[i]) else { return };
    let width = match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return,
    };
    if continuations + 1 < width {
        bytes.truncate(bytes.len() - continuations - 1);
    }
}

impl Drop for Lines {
    /// A last line with no end is logged when the instance goes.
    fn drop(&mut self) {
        if !self.cut {
            self.log_line();
        }
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
        self.lines.lock().unwrap().push(&bytes);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn split(writes: &[&[u8]]) -> Vec<String> {
        let logged = Arc::new(Mutex::new(Vec::new()));
        let mut lines = Lines::new(Box::new({
            let logged = logged.clone();
            move |line: &str| logged.lock().unwrap().push(line.to_string())
        }));
        for write in writes {
            lines.push(write);
        }
        drop(lines);
        Arc::try_unwrap(logged).unwrap().into_inner().unwrap()
    }

    #[test]
    fn lines_are_whole_whatever_the_writes() {
        assert_eq!(split(&[b"one\ntw", b"o\r\n\n  \nthr", b"ee"]), ["one", "two", "three"]);
        assert_eq!(split(&[b"a\nb\nc\n"]), ["a", "b", "c"]);
    }

    #[test]
    fn a_long_line_is_cut_once_and_its_rest_skipped() {
        let long = "é".repeat(LINE_MAX_BYTES);
        let (first, second) = long.as_bytes().split_at(LINE_MAX_BYTES + 1);
        let logged = split(&[b"x", first, second, b"\nnext\n"]);
        assert_eq!(logged.len(), 2, "{:?}", logged.iter().map(String::len).collect::<Vec<_>>());
        // "x" and 2047 whole characters: the one cut in two is left out.
        assert_eq!(logged[0], format!("x{}", "é".repeat(LINE_MAX_BYTES / 2 - 1)));
        assert_eq!(logged[1], "next");
    }
}
