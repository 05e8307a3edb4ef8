//! The sink's configuration keys: one table ([`keys`]) that `metadata()`,
//! the README and the parser share, and [`Settings`], the parsed form.

use crate::compress::Compression;
use crate::format::{FormatKind, ParquetCodec};
use crate::partition::{Extractor, PartitionerKind, PathFormat, locale_of};
use chrono_tz::Tz;
use spillway_sdk::{Config, ConfigError, ConfigKey, ConfigReader, ConfigType};

/// S3's smallest part but the last, and Confluent's lower bound for `s3.part.size`.
pub const MIN_PART_SIZE: usize = 5 * 1024 * 1024;

/// Every key the sink takes, in the order the README lists them.
pub fn keys() -> Vec<ConfigKey> {
    use ConfigType::{Boolean, Int, List, Long, String};
    let k = ConfigKey::optional;
    vec![
        k(
            "s3.grant",
            String,
            "s3",
            "Name of the object-store grant to write to: the bucket and prefix of \
             plugin.grant.object-store.<name>.url (s3://bucket/prefix), whose endpoint, region and credentials \
             stay in the host.",
        ),
        k("topics.dir", String, "topics", "Top-level directory, under the granted prefix, of the objects written."),
        k("directory.delim", String, "/", "Separator between the directories of an object's path."),
        k(
            "format.class",
            String,
            "json",
            "Format of the objects: json (one JSON value per line), bytes (raw values, each followed by \
             format.bytearray.separator), csv (a header row, then one row per record; values must be \
             objects or structs) or parquet. Confluent's io.confluent.connect.s3.format.json.JsonFormat, \
             ...bytearray.ByteArrayFormat and ...parquet.ParquetFormat are accepted.",
        ),
        k(
            "format.bytearray.separator",
            String,
            "\\n",
            "With format.class=bytes: written after each value. Backslash escapes \\n, \\r, \\t, \\\\ and \
             \\uXXXX are understood.",
        ),
        k(
            "compression.type",
            String,
            "none",
            "Compression of json, bytes and csv objects: none, gzip (.gz), snappy (framed, .snappy) or zstd \
             (.zst). Ignored for parquet, which compresses inside the file (parquet.codec), as in Confluent's \
             sink.",
        ),
        k(
            "s3.compression.type",
            String,
            "",
            "Confluent's name for compression.type, accepted in its place (not both).",
        ),
        k(
            "storage.class",
            String,
            "io.confluent.connect.s3.storage.S3Storage",
            "Confluent's storage class: io.confluent.connect.s3.storage.S3Storage, the only one.",
        ),
        k(
            "schema.compatibility",
            String,
            "NONE",
            "Confluent's schema compatibility: NONE only. Objects are not rotated when a record's schema \
             changes (Confluent's BACKWARD, FORWARD and FULL rotate Avro and Parquet objects on a schema change).",
        ),
        k(
            "parquet.codec",
            String,
            "snappy",
            "Compression of Parquet column chunks: none, snappy or gzip. Objects are named .snappy.parquet, \
             .gz.parquet or .parquet.",
        ),
        k(
            "partitioner.class",
            String,
            "default",
            "How records map to directories: default (<topics.dir>/<topic>/partition=<p>/), field \
             (<field>=<value>/... from partition.field.name), time (path.format over partition.duration.ms \
             windows), hourly or daily. Confluent's io.confluent.connect.storage.partitioner classes \
             (DefaultPartitioner, FieldPartitioner, TimeBasedPartitioner, HourlyPartitioner, \
             DailyPartitioner) are accepted.",
        ),
        k(
            "partition.field.name",
            List,
            "",
            "With partitioner.class=field: the value fields (a.b for a nested one) whose values name the \
             directories, in order. A record without one, or whose field is not a string, integer or \
             boolean, is rejected.",
        ),
        k(
            "partition.duration.ms",
            Long,
            "-1",
            "With partitioner.class=time: the length of one time window, in ms; windows are aligned to \
             midnight in timezone.",
        ),
        k(
            "path.format",
            String,
            "",
            "With partitioner.class=time: the directory of a window, as a Joda-Time pattern with text in \
             single quotes, e.g. 'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH. Understood: y Y M (MMM, MMMM for \
             names) d D H h k m s S E (EEEE for names) a w x Z z.",
        ),
        k(
            "timezone",
            String,
            "UTC",
            "IANA time zone (e.g. Europe/Paris) in which time windows, path.format and \
             rotate.schedule.interval.ms are reckoned.",
        ),
        k(
            "locale",
            String,
            "en",
            "Locale of month and day names in path.format (MMM, MMMM, E, EEEE, a): en, fr, de_DE, pt-BR, ...",
        ),
        k(
            "timestamp.extractor",
            String,
            "Wallclock",
            "The time of a record, for the time partitioner and rotate.interval.ms: Record (the Kafka \
             timestamp), RecordField (the value's timestamp.field) or Wallclock (the time it is written). A \
             record without the time asked for is rejected.",
        ),
        k(
            "timestamp.field",
            String,
            "timestamp",
            "With timestamp.extractor=RecordField: the value field (a.b when nested) holding the time: \
             milliseconds since the epoch, a Connect Timestamp or Date, or ISO-8601 text.",
        ),
        k(
            "flush.size",
            Int,
            "1000",
            "Records per object: an object is written once it holds this many. Objects are often smaller: \
             see rotate.*, max.open.objects, and the host's flushes (a share group flushes at its in-flight \
             cap and before locks expire).",
        ),
        k(
            "rotate.interval.ms",
            Long,
            "-1",
            "Record-time rotation: an object is written when a record's time (timestamp.extractor) is at \
             least its first record's time plus this many ms; that record starts the next object. -1: off.",
        ),
        k(
            "rotate.schedule.interval.ms",
            Long,
            "-1",
            "Wall-clock rotation: an open object is written at the next multiple of this many ms since \
             midnight in timezone after it opened, even if no record arrives. -1: off.",
        ),
        k(
            "behavior.on.null.values",
            String,
            "fail",
            "What a record with a null value (a tombstone) does: fail (the task fails, naming its topic, \
             partition and offset), ignore (acknowledged, nothing written) or write (a JSON null line, an \
             empty bytes value, a row of nulls in csv and parquet).",
        ),
        k(
            "store.kafka.keys",
            Boolean,
            "false",
            "Also write each record's key, in a companion object named like the values' with .keys before \
             the extension: one entry per record, in the same order.",
        ),
        k(
            "store.kafka.headers",
            Boolean,
            "false",
            "Also write each record's headers, in a companion object named like the values' with .headers \
             before the extension: one entry per record, in the same order.",
        ),
        k(
            "insert.topic.field",
            String,
            "",
            "Name of a field to add to each object or struct value holding the record's topic (as Connect's \
             InsertField). Empty: none.",
        ),
        k(
            "insert.partition.field",
            String,
            "",
            "Name of a field to add to each object or struct value holding the record's partition. Empty: none.",
        ),
        k(
            "insert.offset.field",
            String,
            "",
            "Name of a field to add to each object or struct value holding the record's offset; with the \
             topic and partition fields, readers keep one row per (topic, partition, offset). Empty: none.",
        ),
        k(
            "filename.offset.zero.pad.width",
            Int,
            "10",
            "Digits of the first offset in object names, zero-padded so that names sort by offset.",
        ),
        k(
            "s3.part.size",
            Int,
            "26214400",
            "Bytes of one multipart-upload part, at least 5242880 (5 MiB): an object whose encoded bytes \
             reach it streams them as a part; smaller objects go up in one request.",
        ),
        k(
            "max.open.objects",
            Int,
            "64",
            "Most objects a task keeps open at once. Opening one more, or buffering more than \
             s3.part.size × max.open.objects bytes in all (and never more than half of \
             plugin.memory.max.bytes), writes the largest open objects early.",
        ),
    ]
}

/// The parsed configuration of one task.
#[derive(Clone, Debug)]
pub struct Settings {
    pub grant: String,
    pub topics_dir: String,
    pub delim: String,
    pub format: FormatKind,
    pub separator: Vec<u8>,
    pub compression: Compression,
    pub parquet_codec: ParquetCodec,
    pub partitioner: PartitionerKind,
    pub timezone: Tz,
    pub extractor: Extractor,
    pub flush_size: u64,
    pub rotate_interval_ms: i64,
    pub rotate_schedule_interval_ms: i64,
    pub on_null: OnNull,
    pub store_keys: bool,
    pub store_headers: bool,
    pub insert_topic: Option<String>,
    pub insert_partition: Option<String>,
    pub insert_offset: Option<String>,
    pub offset_pad: usize,
    pub part_size: usize,
    pub max_open: usize,
    /// Bytes all open objects may buffer: `s3.part.size` × `max.open.objects`,
    /// at most half the plugin's memory (`plugin.memory.max.bytes`).
    pub memory_budget: usize,
    pub task_id: String,
}

/// The host's default `plugin.memory.max.bytes`.
const HOST_MEMORY_DEFAULT: u64 = 256 << 20;

/// `behavior.on.null.values`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnNull {
    Ignore,
    Fail,
    Write,
}

impl Settings {
    /// Parses and checks the whole configuration; every problem is reported, one per key.
    pub fn parse(config: &Config) -> Result<Settings, Vec<ConfigError>> {
        let mut r = ConfigReader::new(config, keys());

        let grant = r.string("s3.grant").trim().to_string();
        if grant.is_empty() || !grant.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            r.error("s3.grant", "a grant name is [a-z0-9-]+");
        }
        let delim = r.string("directory.delim");
        if delim.is_empty() {
            r.error("directory.delim", "must not be empty");
        }
        let topics_dir = r.string("topics.dir").trim_matches('/').to_string();
        if topics_dir.is_empty() {
            r.error("topics.dir", "must not be empty");
        }

        const JSON: &[&str] = &["json", "io.confluent.connect.s3.format.json.JsonFormat"];
        const BYTES: &[&str] = &["bytes", "bytearray", "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"];
        const CSV: &[&str] = &["csv"];
        const PARQUET: &[&str] = &["parquet", "io.confluent.connect.s3.format.parquet.ParquetFormat"];
        let format = match r.string("format.class").trim() {
            avro if avro.to_ascii_lowercase().contains("avro") => {
                r.error("format.class", "Avro is not supported: use json, bytes, csv or parquet");
                FormatKind::Json
            }
            _ => [FormatKind::Json, FormatKind::Bytes, FormatKind::Csv, FormatKind::Parquet]
                [r.choice("format.class", &[JSON, BYTES, CSV, PARQUET])],
        };
        let separator = match unescape(&r.string("format.bytearray.separator")) {
            Ok(s) => s.into_bytes(),
            Err(e) => {
                r.error("format.bytearray.separator", e);
                Vec::new()
            }
        };
        let compression_key = r.key_or_alias("compression.type", "s3.compression.type");
        let compression = [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Zstd]
            [r.choice(compression_key, &[&["none"], &["gzip"], &["snappy"], &["zstd"]])];
        // Confluent's sink has one storage, and JSON objects carry no schema
        // to be compatible with; other values would change nothing here.
        r.choice("storage.class", &[&["io.confluent.connect.s3.storage.S3Storage"]]);
        r.choice("schema.compatibility", &[&["NONE"]]);
        let parquet_codec = [ParquetCodec::None, ParquetCodec::Snappy, ParquetCodec::Gzip]
            [r.choice("parquet.codec", &[&["none", "uncompressed"], &["snappy"], &["gzip"]])];

        let timezone = r.string("timezone");
        let timezone: Tz = match timezone.trim().parse() {
            Ok(tz) => tz,
            Err(_) => {
                r.error("timezone", format!("'{timezone}' is not an IANA time zone (e.g. UTC, Europe/Paris)"));
                Tz::UTC
            }
        };
        let locale_name = r.string("locale");
        let locale = match locale_of(&locale_name) {
            Some(locale) => locale,
            None => {
                r.error("locale", format!("'{locale_name}' is not a known locale (e.g. en, fr, de_DE)"));
                chrono::Locale::en_US
            }
        };

        let partitioner_index = r.choice(
            "partitioner.class",
            &[
                &["default", "io.confluent.connect.storage.partitioner.DefaultPartitioner"],
                &["field", "io.confluent.connect.storage.partitioner.FieldPartitioner"],
                &["time", "io.confluent.connect.storage.partitioner.TimeBasedPartitioner"],
                &["hourly", "io.confluent.connect.storage.partitioner.HourlyPartitioner"],
                &["daily", "io.confluent.connect.storage.partitioner.DailyPartitioner"],
            ],
        );
        let time = |r: &mut ConfigReader, pattern: String, duration: i64| -> PartitionerKind {
            match PathFormat::parse(&pattern, timezone, locale) {
                Ok(format) => PartitionerKind::Time { duration_ms: duration, format },
                Err(e) => {
                    r.error("path.format", e);
                    PartitionerKind::Default
                }
            }
        };
        let partitioner = match partitioner_index {
            0 => PartitionerKind::Default,
            1 => {
                let fields: Vec<String> = r
                    .string("partition.field.name")
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                if fields.is_empty() {
                    r.error("partition.field.name", "the field partitioner needs at least one field");
                }
                PartitionerKind::Field(fields)
            }
            2 => {
                let duration: i64 = r.number("partition.duration.ms");
                if duration <= 0 {
                    r.error("partition.duration.ms", "the time partitioner needs a positive duration");
                }
                let pattern = r.string("path.format");
                if pattern.trim().is_empty() {
                    r.error("path.format", "the time partitioner needs a path.format");
                    PartitionerKind::Default
                } else {
                    time(&mut r, pattern, duration.max(1))
                }
            }
            3 => time(&mut r, "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH".into(), 3_600_000),
            _ => time(&mut r, "'year'=YYYY/'month'=MM/'day'=dd".into(), 86_400_000),
        };

        let extractor = match r.choice("timestamp.extractor", &[&["Wallclock"], &["Record"], &["RecordField"]]) {
            0 => Extractor::Wallclock,
            1 => Extractor::Record,
            _ => {
                let field = r.string("timestamp.field").trim().to_string();
                if field.is_empty() {
                    r.error("timestamp.field", "RecordField needs a field name");
                }
                Extractor::RecordField(field)
            }
        };

        let flush_size: i64 = r.number("flush.size");
        if flush_size < 1 {
            r.error("flush.size", "must be at least 1");
        }
        let rotate_interval_ms: i64 = r.number("rotate.interval.ms");
        let rotate_schedule_interval_ms: i64 = r.number("rotate.schedule.interval.ms");
        for (key, v) in
            [("rotate.interval.ms", rotate_interval_ms), ("rotate.schedule.interval.ms", rotate_schedule_interval_ms)]
        {
            if v == 0 || v < -1 {
                r.error(key, "a positive number of ms, or -1 for off");
            }
        }
        let on_null = [OnNull::Fail, OnNull::Ignore, OnNull::Write]
            [r.choice("behavior.on.null.values", &[&["fail"], &["ignore"], &["write"]])];
        let store_keys = r.boolean("store.kafka.keys");
        let store_headers = r.boolean("store.kafka.headers");
        let insert_topic = r.optional("insert.topic.field");
        let insert_partition = r.optional("insert.partition.field");
        let insert_offset = r.optional("insert.offset.field");
        let inserts: Vec<&String> = [&insert_topic, &insert_partition, &insert_offset].into_iter().flatten().collect();
        if (1..inserts.len()).any(|i| inserts[..i].contains(&inserts[i])) {
            r.error("insert.offset.field", "insert.*.field names must differ");
        }
        let offset_pad: i64 = r.number("filename.offset.zero.pad.width");
        if !(0..=19).contains(&offset_pad) {
            r.error("filename.offset.zero.pad.width", "between 0 and 19");
        }
        let part_size: i64 = r.number("s3.part.size");
        if part_size < MIN_PART_SIZE as i64 {
            r.error("s3.part.size", format!("at least {MIN_PART_SIZE} (5 MiB, S3's smallest part)"));
        }
        let max_open: i64 = r.number("max.open.objects");
        if max_open < 1 {
            r.error("max.open.objects", "must be at least 1");
        }
        // The host passes its own keys too: the plugin's memory limit bounds the buffers.
        let memory = config
            .get("plugin.memory.max.bytes")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&m| m > 0)
            .unwrap_or(HOST_MEMORY_DEFAULT);
        if part_size > 0 && part_size as u64 > memory / 4 {
            r.error(
                "s3.part.size",
                format!(
                    "{part_size} leaves too little room in plugin.memory.max.bytes={memory}: at most a quarter of it"
                ),
            );
        }
        let memory_budget = (part_size.max(0) as u64).saturating_mul(max_open.max(0) as u64).min(memory / 2) as usize;
        let task_id = config.get("task.id").unwrap_or("0").trim().to_string();
        if task_id.is_empty() || task_id.contains(['/', '\\']) || task_id.starts_with('.') {
            r.error("task.id", format!("'{task_id}' cannot be part of an object name"));
        }

        r.finish(Settings {
            grant,
            topics_dir,
            delim,
            format,
            separator,
            compression,
            parquet_codec,
            partitioner,
            timezone,
            extractor,
            flush_size: flush_size as u64,
            rotate_interval_ms,
            rotate_schedule_interval_ms,
            on_null,
            store_keys,
            store_headers,
            insert_topic,
            insert_partition,
            insert_offset,
            offset_pad: offset_pad as usize,
            part_size: part_size as usize,
            max_open: max_open as usize,
            memory_budget,
            task_id,
        })
    }

    /// The object name's extension after the dot: `json.gz`, `snappy.parquet`, ...
    pub fn extension(&self) -> String {
        match self.format {
            FormatKind::Parquet => self.parquet_codec.extension().to_string(),
            other => format!("{}{}", other.extension(), self.compression.extension()),
        }
    }
}

/// `\n`, `\r`, `\t`, `\\` and `\uXXXX` in a separator, as Java source would read them.
fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let c = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                out.push(c.ok_or_else(|| format!("bad escape \\u{hex}"))?);
            }
            other => return Err(format!("bad escape \\{}", other.map(String::from).unwrap_or_default())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Config {
        Config::from(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>())
    }

    #[test]
    fn defaults_parse_and_confluent_class_names_are_accepted() {
        let s = Settings::parse(&config(&[])).unwrap();
        assert_eq!(
            (s.format, s.extension().as_str(), s.part_size, s.max_open),
            (FormatKind::Json, "json", 26214400, 64)
        );
        // 25 MiB × 64 is more than half the plugin's default 256 MiB.
        assert_eq!(s.memory_budget, 128 << 20);
        let s =
            Settings::parse(&config(&[("max.open.objects", "2"), ("plugin.memory.max.bytes", "4294967296")])).unwrap();
        assert_eq!(s.memory_budget, 50 << 20);
        let errors = Settings::parse(&config(&[("plugin.memory.max.bytes", "67108864"), ("s3.part.size", "20000000")]));
        assert_eq!(errors.unwrap_err()[0].key, "s3.part.size");
        assert_eq!(s.separator, b"\n");
        let s = Settings::parse(&config(&[
            ("format.class", "io.confluent.connect.s3.format.parquet.ParquetFormat"),
            ("partitioner.class", "io.confluent.connect.storage.partitioner.HourlyPartitioner"),
        ]))
        .unwrap();
        assert_eq!((s.format, s.extension().as_str()), (FormatKind::Parquet, "snappy.parquet"));
        assert!(matches!(s.partitioner, PartitionerKind::Time { duration_ms: 3_600_000, .. }));
        let s = Settings::parse(&config(&[
            ("format.class", "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"),
            ("compression.type", "gzip"),
            ("format.bytearray.separator", "\\u0000|"),
        ]))
        .unwrap();
        assert_eq!((s.extension().as_str(), s.separator.as_slice()), ("bin.gz", b"\0|".as_slice()));
    }

    #[test]
    fn every_problem_is_named_by_its_key() {
        let errors = Settings::parse(&config(&[
            ("format.class", "io.confluent.connect.s3.format.avro.AvroFormat"),
            ("s3.part.size", "1000"),
            ("partitioner.class", "time"),
            ("timezone", "Mars/Olympus"),
            ("behavior.on.null.values", "drop"),
        ]))
        .unwrap_err();
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "format.class",
                "timezone",
                "partition.duration.ms",
                "path.format",
                "behavior.on.null.values",
                "s3.part.size"
            ],
            "{errors:?}"
        );
    }
}
