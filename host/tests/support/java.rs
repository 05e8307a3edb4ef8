//! Apache Kafka's own Java clients, from the jars `scripts/kafka.sh`
//! fetched, run beside Spillway's tasks in the same group.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Kafka's console share consumer (a `KafkaShareConsumer` that accepts
/// each record it prints) in share group `group`: it reads until it has had
/// no record for `idle`, then acknowledges what it holds and leaves.
pub struct JavaShareConsumer {
    child: Child,
    out: PathBuf,
}

impl JavaShareConsumer {
    pub fn start(bootstrap: &str, topic: &str, group: &str, idle: Duration, dir: &Path) -> JavaShareConsumer {
        let out = dir.join(format!("java-{group}.out"));
        let script = super::support_dir().join("../../scripts/kafka.sh");
        let child = Command::new("bash")
            .arg(&script)
            .args(["run-class", "org.apache.kafka.tools.consumer.ConsoleShareConsumer"])
            .args(["--bootstrap-server", bootstrap, "--topic", topic, "--group", group])
            .args(["--formatter-property", "print.key=true", "--formatter-property", "print.value=false"])
            .args(["--timeout-ms", &idle.as_millis().to_string()])
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(dir.join(format!("java-{group}.log"))).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        JavaShareConsumer { child, out }
    }

    /// The keys it has printed so far, one per record it accepted.
    pub fn keys(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        // A line without its newline is still being written.
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete.lines().map(str::to_string).collect()
    }

    /// Waits (up to `limit`) for it to leave the group on its own, which
    /// acknowledges the records it printed; answers their keys.
    pub fn finish(mut self, limit: Duration) -> Vec<String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "the Java share consumer failed ({status}): see java-*.log");
                return self.keys();
            }
            assert!(Instant::now() < deadline, "the Java share consumer never went idle");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for JavaShareConsumer {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}
