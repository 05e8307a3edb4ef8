//! A plugin that misbehaves on purpose, for the host's sandbox and failure
//! tests. Its `mode` config picks what `put` does:
//!
//! | mode | put |
//! |---|---|
//! | `accept` | accepts everything |
//! | `hold` | holds everything; a flush accepts what it holds |
//! | `accept-slowly` | sleeps `delay.ms` (a WASI call), then accepts everything |
//! | `log-flood` | writes 10,000 lines to stderr, then accepts everything |
//! | `panic`, `trap` | panics / executes `unreachable` |
//! | `loop` | never returns |
//! | `oom` | allocates until memory runs out |
//! | `reject-odd` | rejects records at odd offsets, accepts the rest |
//! | `retry-first` | asks to retry a record the first time this instance sees it, accepts it after |
//! | `fail-batch` | fails the whole call with a retriable error |
//! | `fail-while-file` | fails the whole call with a retriable error while the file `path` exists (a target outage the test ends), accepts otherwise |
//! | `read-file`, `write-file` | reads / creates the file `path` |
//! | `connect` | opens a TCP connection to `addr` (ip:port) |
//! | `read-socket` | opens a TCP connection to `addr` and waits for a byte from it (blocked in a host call) |
//! | `env`, `clock`, `random` | reads the environment / wall clock / random bytes |
//! | `config-keys` | reports the keys of the config it was started with |
//!
//! The probing modes never fail the call: every record is rejected with a
//! reason that says what the probe saw, for the test to check.
//!
//! `only.task=N` applies the mode to task N alone (the others accept), and
//! `record.file=PATH` appends a line `<key>\t<delivery count>` for every
//! accepted record to PATH (in a granted directory; `{task}` becomes the
//! task's number) before accepting it, for tests to see what arrived;
//! with `record.version=true` each line also names the plugin version that
//! wrote it (`<key>\t<delivery count>\t<version>`).
//!
//! `validate.mode=loop` makes `validate` never return; `validate.sleep.ms=N`
//! makes it sleep N ms, then pass.
//!
//! For hot-swap tests, the build's version can be set when it is compiled
//! (`MISBEHAVE_VERSION=0.2.0`), and `fail.start.version=V` makes `start`
//! fail in version V only.

/// The version this build says it is.
const VERSION: &str = match option_env!("MISBEHAVE_VERSION") {
    Some(version) => version,
    None => env!("CARGO_PKG_VERSION"),
};

use spillway_sdk::{
    Config, ConfigError, FlushScope, Outcome, PluginMetadata, PutReport, Settlement, Sink, SinkRecord, TaskError,
};

pub struct Misbehave {
    mode: String,
    config: Config,
    record_file: Option<std::fs::File>,
    /// Records seen before, for `retry-first`.
    seen: std::collections::HashSet<(String, i32, i64)>,
    /// `hold`: each held record's id, and its line for `record.file`.
    held: Vec<(u64, Vec<u8>)>,
}

impl Sink for Misbehave {
    fn metadata() -> PluginMetadata {
        PluginMetadata::new("misbehave", VERSION, "Misbehaves on purpose, for tests.")
    }

    /// `validate.mode=loop` never returns, `validate.sleep.ms` takes its
    /// time, for the herder's tests.
    fn validate(config: &Config) -> Vec<ConfigError> {
        if let Some(ms) = config.get("validate.sleep.ms").and_then(|ms| ms.parse().ok()) {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        if config.get("validate.mode") == Some("loop") {
            let mut n = 0u64;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, TaskError> {
        if config.get("fail.start.version") == Some(VERSION) {
            return Err(TaskError::Fatal(format!("version {VERSION} refuses to start (fail.start.version)")));
        }
        let this_task = config.get("task.id").unwrap_or("0");
        let mode = match config.get("only.task") {
            Some(task) if task != this_task => "accept",
            _ => config.get("mode").unwrap_or("accept"),
        }
        .to_string();
        let record_file = match config.get("record.file").map(|p| p.replace("{task}", this_task)) {
            Some(path) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| TaskError::Fatal(format!("cannot open '{path}': {e}")))?,
            ),
            None => None,
        };
        Ok(Misbehave { mode, config, record_file, seen: Default::default(), held: Vec::new() })
    }

    fn put(&mut self, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError> {
        if self.mode == "hold" {
            for record in &batch {
                let line = self.line(record);
                self.held.push((record.id, line));
            }
            return Ok(PutReport { outcomes: vec![Outcome::Hold; batch.len()], settled: Vec::new() });
        }
        let report = self.misbehave(&batch)?;
        self.record_accepted(&batch, &report)?;
        Ok(report)
    }

    /// `hold`: writes the held records' lines, then accepts them.
    fn flush(&mut self, _scope: FlushScope) -> Result<Vec<Settlement>, TaskError> {
        let lines: Vec<u8> = self.held.iter().flat_map(|(_, line)| line.iter().copied()).collect();
        self.write_lines(&lines)?;
        Ok(self.held.drain(..).map(|(id, _)| Settlement { id, outcome: Outcome::Accept }).collect())
    }
}

impl Misbehave {
    /// Writes the keys of accepted records, one per line, before they are
    /// reported accepted.
    fn record_accepted(&mut self, batch: &[SinkRecord], report: &PutReport) -> Result<(), TaskError> {
        let mut lines = Vec::new();
        for (record, outcome) in batch.iter().zip(&report.outcomes) {
            if matches!(outcome, Outcome::Accept) {
                lines.extend(self.line(record));
            }
        }
        self.write_lines(&lines)
    }

    /// A record's line for `record.file`.
    fn line(&self, record: &SinkRecord) -> Vec<u8> {
        let mut line = record.key.clone().unwrap_or_else(|| b"<null>".to_vec());
        line.extend_from_slice(format!("\t{}", record.delivery_count).as_bytes());
        if self.config.get("record.version") == Some("true") {
            line.extend_from_slice(format!("\t{VERSION}").as_bytes());
        }
        line.push(b'\n');
        line
    }

    fn write_lines(&mut self, lines: &[u8]) -> Result<(), TaskError> {
        let Some(file) = self.record_file.as_mut() else { return Ok(()) };
        use std::io::Write;
        file.write_all(lines).map_err(|e| TaskError::Retriable(format!("record.file: {e}")))
    }

    fn misbehave(&mut self, batch: &[SinkRecord]) -> Result<PutReport, TaskError> {
        let each = |f: &dyn Fn(&SinkRecord) -> Outcome| PutReport {
            outcomes: batch.iter().map(f).collect(),
            settled: Vec::new(),
        };
        let probe = |seen: String| Ok(each(&|_| Outcome::Reject(seen.clone())));
        match self.mode.as_str() {
            "accept" => Ok(PutReport::accept_all(batch.len())),
            "accept-slowly" => {
                let ms = self.config.get("delay.ms").and_then(|v| v.parse().ok()).unwrap_or(50);
                std::thread::sleep(std::time::Duration::from_millis(ms));
                Ok(PutReport::accept_all(batch.len()))
            }
            "log-flood" => {
                for i in 0..10_000 {
                    eprintln!("flood {i}: {}", "x".repeat(100));
                }
                Ok(PutReport::accept_all(batch.len()))
            }
            "panic" => panic!("misbehave panicked on purpose"),
            "trap" => trap(),
            "loop" => {
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "oom" => {
                let mut hog: Vec<Vec<u8>> = Vec::new();
                loop {
                    hog.push(std::hint::black_box(vec![1u8; 1 << 20]));
                }
            }
            "reject-odd" => Ok(each(&|r| {
                if r.offset % 2 == 1 { Outcome::Reject(format!("odd offset {}", r.offset)) } else { Outcome::Accept }
            })),
            "retry-first" => {
                let seen = &mut self.seen;
                let outcomes = batch
                    .iter()
                    .map(|r| match seen.insert((r.topic.clone(), r.partition, r.offset)) {
                        true => Outcome::Retry("first attempt".into()),
                        false => Outcome::Accept,
                    })
                    .collect();
                Ok(PutReport { outcomes, settled: Vec::new() })
            }
            "fail-batch" => Err(TaskError::Retriable("target unavailable".into())),
            "fail-while-file" => match std::fs::exists(self.config.get("path").unwrap_or("/outage")) {
                Ok(false) => Ok(PutReport::accept_all(batch.len())),
                _ => Err(TaskError::Retriable("target unavailable".into())),
            },
            "read-file" => probe(match std::fs::read(self.config.get("path").unwrap_or("/etc/passwd")) {
                Ok(bytes) => format!("read {} bytes", bytes.len()),
                Err(e) => format!("refused: {e}"),
            }),
            "write-file" => probe(match std::fs::write(self.config.get("path").unwrap_or("/tmp/escape"), b"x") {
                Ok(()) => "wrote".into(),
                Err(e) => format!("refused: {e}"),
            }),
            "connect" => probe(match connect(self.config.get("addr").unwrap_or("127.0.0.1:9")) {
                Ok(_) => "connected".into(),
                Err(e) => format!("refused: {e}"),
            }),
            "read-socket" => probe(match connect(self.config.get("addr").unwrap_or("127.0.0.1:9")) {
                Ok(socket) => socket.read_one(),
                Err(e) => format!("refused: {e}"),
            }),
            "env" => probe(format!("env vars: {}", std::env::vars().count())),
            "config-keys" => {
                let mut keys: Vec<&str> = self.config.iter().map(|(k, _)| k).collect();
                keys.sort();
                probe(format!("config keys: {}", keys.join(",")))
            }
            "clock" => probe(format!(
                "clock secs: {}",
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
            )),
            "random" => probe(format!("random: {:?}", random_bytes())),
            other => Err(TaskError::Fatal(format!("unknown mode '{other}'"))),
        }
    }
}

fn trap() -> ! {
    #[cfg(target_family = "wasm")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_family = "wasm"))]
    std::process::abort();
}

#[cfg(target_family = "wasm")]
fn random_bytes() -> Vec<u8> {
    wasi::random::random::get_random_bytes(8)
}

#[cfg(not(target_family = "wasm"))]
fn random_bytes() -> Vec<u8> {
    Vec::new()
}

/// An open TCP connection (the socket must outlive its streams).
#[cfg(target_family = "wasm")]
struct Connection {
    input: wasi::io::streams::InputStream,
    _output: wasi::io::streams::OutputStream,
    _socket: wasi::sockets::tcp::TcpSocket,
}

#[cfg(target_family = "wasm")]
impl Connection {
    /// Blocks (in the host's `poll`) until the peer sends a byte or closes.
    fn read_one(&self) -> String {
        match self.input.blocking_read(1) {
            Ok(bytes) => format!("read {} bytes", bytes.len()),
            Err(e) => format!("read failed: {e:?}"),
        }
    }
}

#[cfg(not(target_family = "wasm"))]
struct Connection;

#[cfg(not(target_family = "wasm"))]
impl Connection {
    fn read_one(&self) -> String {
        String::new()
    }
}

#[cfg(target_family = "wasm")]
fn connect(addr: &str) -> Result<Connection, String> {
    use wasi::sockets::network::{IpAddressFamily, IpSocketAddress, Ipv4SocketAddress};
    let parsed: std::net::SocketAddrV4 = addr.parse().map_err(|e| format!("bad addr: {e}"))?;
    let o = parsed.ip().octets();
    let network = wasi::sockets::instance_network::instance_network();
    let socket = wasi::sockets::tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)
        .map_err(|e| format!("create: {e:?}"))?;
    let remote = IpSocketAddress::Ipv4(Ipv4SocketAddress { port: parsed.port(), address: (o[0], o[1], o[2], o[3]) });
    socket.start_connect(&network, remote).map_err(|e| format!("connect: {e:?}"))?;
    socket.subscribe().block();
    let (input, output) = socket.finish_connect().map_err(|e| format!("connect: {e:?}"))?;
    Ok(Connection { input, _output: output, _socket: socket })
}

#[cfg(not(target_family = "wasm"))]
fn connect(_addr: &str) -> Result<Connection, String> {
    Err("native build".into())
}

spillway_sdk::export_sink!(Misbehave);
