//! The main job, `spillway run --demo` (what `scripts/demo.sh` runs), as a
//! user runs it: the real binary, the sample records, two file-sink tasks in
//! a share group, on the broker in `SPILLWAY_TEST_BOOTSTRAP` or a librdkafka
//! mock. No fault is injected, so each record is written exactly once, and
//! that must hold on a busy machine too: it once did not, because the sample
//! producer was dropped mid-run and, on the mock, the close of any
//! connection ends every share session on the broker.

mod support;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use support::herder::plugin_dir;
use support::{Broker, assert_each_exactly_once, file_sink_keys};

const RECORDS: usize = 10_000;

/// Threads that keep every core busy until dropped.
struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuHog {
    fn start() -> CpuHog {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores + 1)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut spin = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        spin = std::hint::black_box(spin.wrapping_add(1));
                    }
                })
            })
            .collect();
        CpuHog { stop, threads }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            thread.join().ok();
        }
    }
}

#[test]
fn the_demo_writes_each_record_once_on_a_busy_machine() {
    let broker = Broker::start_or_env();
    let out = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let hog = CpuHog::start();
    let run = Command::new(env!("CARGO_BIN_EXE_spillway"))
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["run", "--demo", "--bootstrap-servers", &broker.bootstrap, "--records", &RECORDS.to_string()])
        .arg("--plugin")
        .arg(plugin_dir().join("file-sink.wasm"))
        .arg("--out-dir")
        .arg(out.path())
        .output()
        .expect("running spillway");
    drop(hog);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "spillway run --demo failed: {stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    println!("{stdout}");

    // The sample producer keys record i `key-i`.
    let expected: Vec<String> = (0..RECORDS).map(|i| format!("key-{i}")).collect();
    assert_each_exactly_once(&file_sink_keys(out.path(), "records-"), &expected, "the demo, on a busy machine");
    assert!(stdout.contains("each record once: yes"), "the summary disagrees with the files: {stdout}");
}
