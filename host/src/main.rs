//! The `spillway` command.

use anyhow::{Context, Result, anyhow, bail};
use clap::{Parser, Subcommand};
use spillway::connector::{ConnectorConfig, GroupProtocol, WorkerDefaults};
use spillway::herder::WorkerConfig;
use spillway::kafka::embedded::EmbeddedBroker;
use spillway::kafka::producer::Producer;
use spillway::runtime::Runtime;
use spillway::task::TaskMetrics;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "spillway",
    version,
    about = "A WebAssembly plugin host for Kafka sink connectors",
    after_help = spillway::cli::EXIT_CODES
)]
struct Cli {
    /// Where compiled plugins are cached.
    #[arg(long, global = true, env = "SPILLWAY_CACHE_DIR", default_value = ".spillway/cache")]
    cache_dir: PathBuf,
    /// How log lines are written to stderr.
    #[arg(long, global = true, env = "SPILLWAY_LOG_FORMAT", value_enum, default_value_t)]
    log_format: spillway::rest::LogFormat,
    #[command(flatten)]
    client: spillway::cli::ClientArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs one connector. Without --bootstrap-servers, starts an embedded
    /// broker, feeds it sample records and stops once all are acknowledged.
    Run(RunArgs),
    /// Runs the worker: the REST API and every stored connector.
    Serve(ServeArgs),
    /// Manages connectors through a worker's REST API.
    #[command(after_help = spillway::cli::EXIT_CODES)]
    Connectors {
        #[command(subcommand)]
        command: spillway::cli::ConnectorsCommand,
    },
    /// Lists a worker's installed plugins, or shows one's config keys.
    #[command(after_help = spillway::cli::EXIT_CODES)]
    Plugins {
        /// Without one, `list`.
        #[command(subcommand)]
        command: Option<spillway::cli::PluginsCommand>,
    },
    /// Shows or sets a worker's log levels.
    #[command(after_help = spillway::cli::EXIT_CODES)]
    Loggers {
        #[command(subcommand)]
        command: spillway::cli::LoggersCommand,
    },
    /// Prints the connector config keys the host reads, as the README's
    /// markdown table.
    ConfigKeys {
        /// The worker config's keys (`serve --config`) instead.
        #[arg(long)]
        worker: bool,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// The worker config, a properties file as Connect's
    /// connect-standalone.properties (`spillway config-keys --worker` lists
    /// its keys); the flags below override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Overrides the IP of `listeners` (default 127.0.0.1).
    #[arg(long)]
    host: Option<std::net::IpAddr>,
    /// Overrides the port of `listeners` (default 8083).
    #[arg(long)]
    port: Option<u16>,
    /// Kafka bootstrap servers (`bootstrap.servers`); omit to use the embedded broker.
    #[arg(long, env = "SPILLWAY_BOOTSTRAP_SERVERS")]
    bootstrap_servers: Option<String>,
    /// Directory of plugin components, *.wasm (`plugin.path`, default target/plugins).
    #[arg(long)]
    plugin_dir: Option<PathBuf>,
    /// Where connector configs and target states are kept (`config.storage.file`,
    /// default .spillway/connectors.json).
    #[arg(long)]
    state_file: Option<PathBuf>,
}

impl ServeArgs {
    /// The worker config file with the flags over it.
    fn worker_config(&self) -> Result<WorkerConfig> {
        let mut overrides = std::collections::BTreeMap::new();
        let mut set = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                overrides.insert(key.to_string(), value);
            }
        };
        set("bootstrap.servers", self.bootstrap_servers.clone());
        set("plugin.path", self.plugin_dir.as_ref().map(|p| p.display().to_string()));
        set("config.storage.file", self.state_file.as_ref().map(|p| p.display().to_string()));
        let mut worker = WorkerConfig::load(self.config.as_deref(), &overrides).map_err(|problems| {
            let lines: Vec<String> = problems.iter().map(|p| format!("  {}: {}", p.key, p.message)).collect();
            anyhow::anyhow!("invalid worker config:\n{}", lines.join("\n"))
        })?;
        if let Some(host) = self.host {
            worker.listener.set_ip(host);
        }
        if let Some(port) = self.port {
            worker.listener.set_port(port);
        }
        Ok(worker)
    }
}

#[derive(clap::Args)]
struct RunArgs {
    /// Kafka bootstrap servers; omit to use the embedded broker.
    #[arg(long, env = "SPILLWAY_BOOTSTRAP_SERVERS")]
    bootstrap_servers: Option<String>,
    /// The plugin component (.wasm).
    #[arg(long, default_value = "target/plugins/file-sink.wasm")]
    plugin: PathBuf,
    /// Connector config as a JSON object of strings (Connect's format); the
    /// embedded run has a default.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Sample records to produce first (the embedded run defaults to 10000).
    #[arg(long)]
    records: Option<u64>,
    /// Where the embedded run's file sink writes.
    #[arg(long, default_value = ".spillway/out")]
    out_dir: PathBuf,
    /// Run the sample connector (file-sink, sample records, stop once all
    /// are acknowledged) against --bootstrap-servers too, in a share group.
    /// Without --bootstrap-servers this is what `run` does anyway, on the
    /// embedded broker, in a classic group (it has no share groups).
    #[arg(long)]
    demo: bool,
    /// What to call the broker in the output (scripts/demo.sh names the test
    /// broker it started).
    #[arg(long)]
    broker_name: Option<String>,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let loggers = spillway::rest::LogLevels::install("info,librdkafka=warn,rdkafka=warn", cli.log_format);
    let runtime = tokio::runtime::Runtime::new()?;
    match cli.command {
        Command::Run(args) => runtime.block_on(run(&cli.cache_dir, args)),
        Command::Serve(args) => runtime.block_on(serve(&cli.cache_dir, args, loggers)),
        Command::Connectors { command } => finish(runtime.block_on(spillway::cli::connectors(&cli.client, command))),
        Command::Plugins { command } => {
            let command = command.unwrap_or(spillway::cli::PluginsCommand::List);
            finish(runtime.block_on(spillway::cli::plugins(&cli.client, command)))
        }
        Command::Loggers { command } => finish(runtime.block_on(spillway::cli::loggers(&cli.client, command))),
        Command::ConfigKeys { worker } => {
            let keys = match worker {
                true => spillway::herder::worker_keys(),
                false => spillway::connector::connector_keys(),
            };
            print!("{}", keys.markdown_table());
            Ok(())
        }
    }
}

/// Prints a client command's answer; on failure, the message on stderr and
/// the exit code of its kind (see `spillway --help`).
fn finish(result: Result<String, spillway::cli::CliError>) -> Result<()> {
    use std::io::Write;
    match result {
        Ok(text) => {
            print!("{text}");
            Ok(())
        }
        Err(e) => {
            if let Some(output) = &e.output {
                print!("{output}");
            }
            let _ = std::io::stdout().flush();
            eprintln!("error: {}", e.message);
            std::process::exit(e.kind.exit_code());
        }
    }
}

/// HTTPS and authentication of the REST API, from the worker config.
fn rest_security(worker: &WorkerConfig) -> Result<spillway::rest::RestSecurity> {
    use spillway::rest::{Credentials, RestSecurity, security};
    let tls = match &worker.listener_tls {
        Some((certificate, key)) => Some(std::sync::Arc::new(
            security::server_tls(certificate, key).map_err(|e| anyhow!("listeners.https: {e}"))?,
        )),
        None => None,
    };
    let auth = match (&worker.rest_users, &worker.rest_tokens) {
        (None, None) => None,
        (users, tokens) => Some(std::sync::Arc::new(
            Credentials::load(users.as_deref(), tokens.as_deref()).map_err(|e| anyhow!("rest.auth: {e}"))?,
        )),
    };
    let host_names = std::sync::Arc::new(spillway::rest::HostNames::new(worker.rest_host_names.iter().cloned()));
    Ok(RestSecurity { tls, auth, host_names })
}

async fn serve(cache_dir: &Path, args: ServeArgs, loggers: spillway::rest::LogLevels) -> Result<()> {
    let mut worker = args.worker_config()?;
    let rest = rest_security(&worker)?;
    // Keeps the embedded broker alive as long as the worker.
    let mut _embedded = None;
    if worker.bootstrap_servers.is_none() {
        let broker = EmbeddedBroker::start(1)?;
        let b = broker.bootstrap_servers();
        tracing::warn!("no bootstrap servers given: started the embedded broker at {b} (classic groups only)");
        _embedded = Some(broker);
        worker.use_embedded_broker(b).map_err(|e| anyhow!("invalid worker config: {e}"))?;
    }
    let listener =
        tokio::net::TcpListener::bind(worker.listener).await.with_context(|| format!("binding {}", worker.listener))?;
    worker.bind(listener.local_addr()?);
    let scheme = if rest.tls.is_some() { "https" } else { "http" };
    let addr = worker.listener;
    let herder = spillway::herder::Herder::start(worker, Runtime::new(cache_dir)?).await?;
    tracing::info!("REST API on {scheme}://{addr}");
    spillway::rest::serve_secured(listener, herder.clone(), loggers, rest, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    herder.shutdown().await?;
    Ok(())
}

async fn run(cache_dir: &Path, args: RunArgs) -> Result<()> {
    // The embedded broker lives as long as this function: keep it in scope.
    let mut embedded = None;
    let bootstrap = match &args.bootstrap_servers {
        Some(b) => b.clone(),
        None => {
            let broker = EmbeddedBroker::start(1)?;
            let bootstrap = broker.bootstrap_servers();
            eprintln!("no bootstrap servers given: started the embedded broker at {bootstrap}");
            embedded = Some(broker);
            bootstrap
        }
    };

    let demo = embedded.is_some() || args.demo;
    let broker_name = match (&args.broker_name, &embedded) {
        (Some(name), _) => name.clone(),
        (None, Some(_)) => "the embedded broker (librdkafka's mock in-process; classic groups only)".into(),
        (None, None) => "the given cluster".into(),
    };
    eprintln!("broker: {broker_name} at {bootstrap}");
    let raw = match &args.config {
        Some(path) => read_config(path)?,
        None if demo => demo_config(&args.out_dir, embedded.is_none())?,
        None => bail!("--config is required with --bootstrap-servers (or --demo)"),
    };
    let config = ConnectorConfig::parse(&raw, &WorkerDefaults::default()).map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|p| format!("  {}: {}", p.key, p.message)).collect();
        anyhow::anyhow!("invalid connector config:\n{}", lines.join("\n"))
    })?;
    if config.topics.is_empty() {
        // It creates the topics on the embedded broker and produces to the first.
        bail!("spillway run needs topics, not topics.regex");
    }

    let records = args.records.or(demo.then_some(10_000)).unwrap_or(0);
    if let Some(broker) = &embedded {
        for topic in &config.topics {
            broker.create_topic(topic, 4)?;
        }
    }

    // One way to start a task: a standalone herder of this run's own, with
    // a plugin directory holding only this plugin and a state file of its own.
    let work_dir = std::env::temp_dir().join(format!("spillway-run-{}", std::process::id()));
    let plugin_dir = work_dir.join("plugins");
    std::fs::create_dir_all(&plugin_dir).with_context(|| format!("creating {}", plugin_dir.display()))?;
    let result = run_connector(cache_dir, &args, &config, raw, &bootstrap, &plugin_dir, records, demo).await;
    let _ = std::fs::remove_dir_all(&work_dir);
    let summary = result?;
    println!("summary for connector {}:", config.name);
    println!("  records produced      {}", summary.produced);
    for line in summary.lines {
        println!("{line}");
    }
    if let Some((rate, Some(took))) = summary.finished_rate {
        let took = took.as_secs_f64();
        println!(
            "  rate                  {rate:.0} records/s (acknowledged, from the first delivered record: {took:.2} s)"
        );
    }
    println!("  broker                {broker_name}, {}", protocol_name(config.group_protocol));
    if demo && args.config.is_none() {
        let written = count_lines(&args.out_dir)?;
        println!(
            "  lines written         {written}  (each record once: {})",
            if written == summary.produced { "yes" } else { "no" }
        );
    }
    if !summary.failed.is_empty() {
        bail!("{}", summary.failed.join("\n"));
    }
    Ok(())
}

/// What a run did, for its summary.
struct RunSummary {
    produced: u64,
    /// The counts, a line each.
    lines: Vec<String>,
    finished_rate: Option<(f64, Option<Duration>)>,
    failed: Vec<String>,
}

fn protocol_name(protocol: GroupProtocol) -> &'static str {
    match protocol {
        GroupProtocol::Share => "a share group (opted in: share groups are opt-in, KIP-1302)",
        GroupProtocol::Classic => "a classic consumer group",
    }
}

/// Runs the connector on a standalone herder until every sample record is
/// acknowledged (or a task fails, or Ctrl-C), then stops it.
#[allow(clippy::too_many_arguments)]
async fn run_connector(
    cache_dir: &Path,
    args: &RunArgs,
    config: &ConnectorConfig,
    raw: BTreeMap<String, String>,
    bootstrap: &str,
    plugin_dir: &Path,
    records: u64,
    demo: bool,
) -> Result<RunSummary> {
    let runtime = Runtime::new(cache_dir)?;
    let started = Instant::now();
    let plugin = runtime.load_file(&args.plugin).await?;
    eprintln!(
        "plugin {} {} ({}) ready in {} ms",
        plugin.metadata.name,
        plugin.metadata.version,
        &plugin.digest[..19],
        started.elapsed().as_millis()
    );
    if plugin.metadata.name != config.plugin && !spillway::connector::answers_to(&plugin.connect, &config.plugin) {
        bail!("connector.class is '{}' but the plugin is '{}'", config.plugin, plugin.metadata.name);
    }
    let file = format!("{}-{}.wasm", plugin.metadata.name, plugin.metadata.version);
    std::fs::copy(&args.plugin, plugin_dir.join(file)).with_context(|| format!("copying {}", args.plugin.display()))?;
    let worker = WorkerConfig::parse(&BTreeMap::from([
        ("bootstrap.servers".to_string(), bootstrap.to_string()),
        ("plugin.path".into(), plugin_dir.display().to_string()),
        ("config.storage.file".into(), plugin_dir.with_file_name("connectors.json").display().to_string()),
    ]))
    .map_err(|problems| anyhow!("the run's worker config: {problems:?}"))?;

    // Connected before the tasks join: see `Producer::connect`.
    let producer = Producer::connect(bootstrap, &[]).await?;
    let herder = spillway::herder::Herder::start(worker, runtime).await?;
    let name = config.name.clone();
    herder.create(name.clone(), raw, None).await.map_err(|e| anyhow!("{e}"))?;
    eprintln!(
        "connector {} running {} task(s) in {} on {}",
        config.name,
        config.tasks_max,
        protocol_name(config.group_protocol),
        config.topics.join(",")
    );
    let failed_tasks = |status: &spillway::herder::ConnectorStateInfo| -> Vec<String> {
        let failed = |state: spillway::herder::State| state == spillway::herder::State::Failed;
        let connector =
            failed(status.connector.state).then(|| format!("connector failed: {:?}", status.connector.trace));
        let tasks = status.tasks.iter().filter(|t| failed(t.state));
        connector
            .into_iter()
            .chain(tasks.map(|t| format!("task {} failed: {}", t.id, t.trace.as_deref().unwrap_or(""))))
            .collect()
    };
    let metrics = || async {
        let entries = herder.task_metrics().await.unwrap_or_default();
        entries.into_iter().map(|e| e.metrics).collect::<Vec<_>>()
    };
    // A new share group starts at the log end from its first fetch: produce
    // once every task has fetched.
    let mut failed = Vec::new();
    loop {
        let m = metrics().await;
        if m.len() == config.tasks_max as usize && m.iter().all(|m| m.polls.load(Relaxed) > 0) {
            break;
        }
        failed = failed_tasks(&herder.status(name.clone()).await.map_err(|e| anyhow!("{e}"))?);
        if !failed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = metrics().await;
    let topic = config.topics[0].clone();
    // The producer comes back from its task and lives until the tasks have
    // stopped: on librdkafka's mock, the close of any connection ends every
    // share session on the broker, and records written but not yet
    // acknowledged would come again.
    let producer = tokio::spawn(async move {
        let sent = producer.send_samples(&topic, 0, records).await;
        (producer, sent)
    });

    let acknowledged = |m: &[Arc<TaskMetrics>]| m.iter().map(|m| m.acknowledged()).sum::<u64>();
    let polled = |m: &[Arc<TaskMetrics>]| m.iter().map(|m| m.polled.load(Relaxed)).sum::<u64>();
    // Checked every 100 ms, so that the rate ends when the last record is
    // acknowledged; progress is printed every second.
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    let run_started = Instant::now();
    let mut ticks = 0u64;
    let mut finished_rate = None;
    while failed.is_empty() {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        ticks += 1;
        let (p, a) = (polled(&metrics), acknowledged(&metrics));
        let done = records > 0 && a >= records && demo;
        if ticks.is_multiple_of(10) || done {
            eprintln!(
                "[{:>4.1}s] delivered {p:>8}  acknowledged {a:>8}  ({:.0} records/s since the first delivery)",
                run_started.elapsed().as_secs_f64(),
                rate(a, first_delivery(&metrics)),
            );
        }
        if done {
            finished_rate = Some((rate(a, first_delivery(&metrics)), first_delivery(&metrics).map(|t| t.elapsed())));
            break;
        }
        failed = failed_tasks(&herder.status(name.clone()).await.map_err(|e| anyhow!("{e}"))?);
    }
    let status = herder.status(name.clone()).await.map_err(|e| anyhow!("{e}"))?;
    if failed.is_empty() {
        failed = failed_tasks(&status);
    }
    herder.shutdown().await.map_err(|e| anyhow!("{e}"))?;
    let (producer, sent) = producer.await?;
    let produced = match sent {
        Ok(()) => records,
        Err(e) => {
            eprintln!("producing sample records failed: {e}");
            0
        }
    };
    drop(producer);

    let sum = |f: fn(&TaskMetrics) -> u64| metrics.iter().map(|m| f(m)).sum::<u64>();
    let lines = vec![
        format!("  records delivered     {}", sum(|m| m.polled.load(Relaxed))),
        format!("  records acknowledged  {}", sum(|m| m.acknowledged())),
        format!("    accepted            {}", sum(|m| m.accepted.load(Relaxed))),
        format!("    rejected            {}", sum(|m| m.rejected.load(Relaxed))),
        format!("    to the DLQ          {}", sum(|m| m.dead_lettered.load(Relaxed))),
        format!("  records released      {}", sum(|m| m.released.load(Relaxed))),
        format!(
            "  sent again by the broker while held, not redelivered  {}",
            sum(|m| m.resent_while_held.load(Relaxed))
        ),
    ];
    Ok(RunSummary { produced, lines, finished_rate, failed })
}

/// When the first record reached any task.
fn first_delivery(metrics: &[Arc<TaskMetrics>]) -> Option<Instant> {
    metrics.iter().filter_map(|m| m.first_delivery.get().copied()).min()
}

/// Records per second since `since`.
fn rate(records: u64, since: Option<Instant>) -> f64 {
    match since.map(|t| t.elapsed().as_secs_f64()) {
        Some(secs) if secs > 0.0 => records as f64 / secs,
        _ => 0.0,
    }
}

/// Lines the sample connector's file sink wrote into `dir`.
fn count_lines(dir: &Path) -> Result<u64> {
    let mut lines = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            lines += std::fs::read_to_string(&path)?.lines().count() as u64;
        }
    }
    Ok(lines)
}

fn read_config(path: &Path) -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    // Accept both a bare config and Connect's {"name": .., "config": {..}}.
    let (name, config) = match value.get("config") {
        Some(config) => (value.get("name").and_then(|n| n.as_str()).map(String::from), config.clone()),
        None => (None, value),
    };
    let serde_json::Value::Object(map) = config else { bail!("{}: config must be a JSON object", path.display()) };
    let mut raw: BTreeMap<String, String> =
        map.into_iter().map(|(k, v)| (k, v.as_str().map(String::from).unwrap_or_else(|| v.to_string()))).collect();
    if let Some(name) = name {
        raw.entry("name".into()).or_insert(name);
    }
    Ok(raw)
}

/// The sample connector: sample records through the file sink into
/// `out_dir`, in a share group where the broker has them.
fn demo_config(out_dir: &Path, share: bool) -> Result<BTreeMap<String, String>> {
    std::fs::create_dir_all(out_dir)?;
    let out_dir = std::fs::canonicalize(out_dir)?;
    // Start afresh, so that the summary's counts match the files.
    for entry in std::fs::read_dir(&out_dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            std::fs::remove_file(path)?;
        }
    }
    let file = out_dir.join("records-{task}.jsonl");
    let out = out_dir.to_str().context("output directory is not UTF-8")?;
    // Each run its own topic and group: a share group starts at the log end.
    let run = uuid::Uuid::new_v4().simple().to_string();
    let topic = format!("spillway-demo-{}", &run[..8]);
    let mut config: BTreeMap<String, String> = [
        ("name", "demo-file-sink"),
        ("connector.class", "file-sink"),
        ("tasks.max", "2"),
        ("topics", topic.as_str()),
        ("file", file.to_str().context("output path is not UTF-8")?),
        ("plugin.grant.fs.out.path", out),
        ("flush.interval.ms", "500"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    if share {
        // Share groups are opt-in (KIP-1302); the embedded broker has none.
        config.insert("consumer.override.group.protocol".into(), "share".into());
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use spillway::cli::{
        ConfigCommand, ConnectorsCommand, LoggersCommand, OffsetsCommand, Output, PluginsCommand, Scope,
    };
    use spillway::rest::LogFormat;

    #[test]
    fn global_flags_go_anywhere_on_the_line() {
        let args = ["spillway", "connectors", "status", "c1", "--url", "http://h:1", "--log-format", "json"];
        let cli = Cli::try_parse_from(args).unwrap();
        assert_eq!(cli.log_format, LogFormat::Json);
        assert_eq!(cli.client.url, "http://h:1");
        assert!(matches!(cli.command, Command::Connectors { .. }));
        // Where it was accepted before still works.
        let cli = Cli::try_parse_from(["spillway", "connectors", "--url", "http://h:2", "list"]).unwrap();
        assert_eq!((cli.log_format, cli.client.url.as_str()), (LogFormat::Text, "http://h:2"));

        // Every global flag before the command, between its words, and after them.
        let lines: [&[&str]; 3] = [
            &["--url", "http://h:3", "-o", "json", "--log-format", "json", "--cache-dir", "c", "loggers", "get"],
            &["loggers", "--output", "json", "--cache-dir", "c", "get", "--url", "http://h:3", "--log-format", "json"],
            &["loggers", "get", "--cache-dir", "c", "--log-format", "json", "--output", "json", "--url", "http://h:3"],
        ];
        for line in lines {
            let cli = Cli::try_parse_from(std::iter::once("spillway").chain(line.iter().copied())).unwrap();
            assert_eq!(cli.client.url, "http://h:3", "{line:?}");
            assert_eq!(cli.client.output, Output::Json, "{line:?}");
            assert_eq!(cli.log_format, LogFormat::Json, "{line:?}");
            assert_eq!(cli.cache_dir, PathBuf::from("c"), "{line:?}");
        }
        let deep = ["spillway", "connectors", "config", "patch", "c", "a=1", "-o", "json", "--url", "http://h:4"];
        let cli = Cli::try_parse_from(deep).unwrap();
        assert_eq!((cli.client.output, cli.client.url.as_str()), (Output::Json, "http://h:4"));
        assert_eq!(Cli::try_parse_from(["spillway", "plugins"]).unwrap().client.output, Output::Table);
    }

    #[test]
    fn plugins_alone_still_lists_them() {
        let cli = Cli::try_parse_from(["spillway", "plugins"]).unwrap();
        assert!(matches!(cli.command, Command::Plugins { command: None }));
        let cli = Cli::try_parse_from(["spillway", "plugins", "config", "noop-sink"]).unwrap();
        assert!(
            matches!(cli.command, Command::Plugins { command: Some(PluginsCommand::Config { name, version: None }) } if name == "noop-sink")
        );
    }

    #[test]
    fn client_commands_parse_their_arguments() {
        let parse = |line: &[&str]| Cli::try_parse_from(std::iter::once("spillway").chain(line.iter().copied()));
        let Command::Connectors {
            command: ConnectorsCommand::Config { command: ConfigCommand::Patch { set, unset, .. } },
        } = parse(&["connectors", "config", "patch", "c", "a=1", "b=", "--unset", "x"]).unwrap().command
        else {
            panic!("not config patch");
        };
        assert_eq!(set, vec![("a".to_string(), "1".to_string()), ("b".into(), "".into())]);
        assert_eq!(unset, vec!["x"]);
        assert!(parse(&["connectors", "config", "patch", "c", "--unset", "x"]).is_ok(), "removing alone is a patch");

        let Command::Connectors {
            command: ConnectorsCommand::Offsets { command: OffsetsCommand::Alter { file, partitions, .. } },
        } = parse(&["connectors", "offsets", "alter", "c", "--partition", "t:0=5", "--partition", "t:1=null"])
            .unwrap()
            .command
        else {
            panic!("not offsets alter");
        };
        assert_eq!((file, partitions.len()), (None, 2));
        assert!(parse(&["connectors", "offsets", "alter", "c", "offsets.json"]).is_ok());

        let Command::Loggers { command: LoggersCommand::Set { scope, .. } } =
            parse(&["loggers", "set", "spillway::task", "debug", "--scope", "cluster"]).unwrap().command
        else {
            panic!("not loggers set");
        };
        assert_eq!(scope, Scope::Cluster);

        // What clap refuses exits with its usage code, 2.
        for line in [
            &["connectors", "config", "patch", "c"][..],
            &["connectors", "config", "patch", "c", "novalue"],
            &["connectors", "offsets", "alter", "c"],
            &["connectors", "offsets", "alter", "c", "f.json", "--partition", "t:0=1"],
            &["connectors", "offsets", "alter", "c", "--partition", "t=1"],
            &["loggers", "set", "root", "info", "--scope", "galaxy"],
            &["connectors", "list", "--output", "yaml"],
        ] {
            let error = parse(line).err().unwrap_or_else(|| panic!("{line:?} parsed"));
            assert_eq!(error.exit_code(), 2, "{line:?}: {error}");
        }
    }

    #[test]
    fn help_lists_the_exit_codes() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit codes:") && help.contains("5  the server could not be reached"), "{help}");
    }
}
