//! Where a record goes: the directory its partitioner encodes (Confluent's
//! layouts) and the record time that time partitioning and rotation use.

use chrono::{DateTime, Locale, NaiveDate, NaiveDateTime, Offset, TimeZone};
use chrono_tz::Tz;
use spillway_sdk::data::Data;

/// `partitioner.class`, parsed.
#[derive(Clone, Debug)]
pub enum PartitionerKind {
    /// `partition=<p>`.
    Default,
    /// `<field>=<value>` per field, joined by the delimiter.
    Field(Vec<String>),
    /// The window holding the record's time, formatted by `path.format`.
    Time { duration_ms: i64, format: PathFormat },
}

/// `timestamp.extractor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extractor {
    Wallclock,
    Record,
    RecordField(String),
}

impl Extractor {
    /// The record's time in ms since the epoch; an error says why there is none.
    pub fn time(&self, record_timestamp: i64, value: Option<&Data>, now_ms: i64) -> Result<i64, String> {
        match self {
            Extractor::Wallclock => Ok(now_ms),
            Extractor::Record if record_timestamp >= 0 => Ok(record_timestamp),
            Extractor::Record => Err("the record has no timestamp (timestamp.extractor=Record)".into()),
            Extractor::RecordField(field) => {
                let data = value
                    .and_then(|v| lookup(v, field))
                    .ok_or_else(|| format!("the value has no timestamp field '{field}'"))?;
                time_of(data).ok_or_else(|| format!("timestamp field '{field}' holds {}, not a time", data.kind()))
            }
        }
    }
}

/// A field of a struct value by a dotted path (`a.b`).
pub fn lookup<'a>(value: &'a Data, path: &str) -> Option<&'a Data> {
    path.split('.').try_fold(value, |v, name| v.get(name)).filter(|v| !v.is_null())
}

fn time_of(data: &Data) -> Option<i64> {
    match data {
        Data::Timestamp(ms) => Some(*ms),
        Data::Date(days) => Some(*days as i64 * 86_400_000),
        Data::String(text) => parse_time(text),
        Data::Float64(v) => Some(*v as i64),
        other => other.as_i64(),
    }
}

/// ISO-8601 text: with an offset, or without one (read as UTC), or a date.
fn parse_time(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp_millis());
    }
    for pattern in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, pattern) {
            return Some(t.and_utc().timestamp_millis());
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .map(|d| d.and_time(Default::default()).and_utc().timestamp_millis())
}

impl PartitionerKind {
    /// The directory (below `<topics.dir>/<topic>/`) of a record.
    pub fn encode(
        &self,
        partition: i32,
        value: Option<&Data>,
        time: impl FnOnce() -> Result<i64, String>,
        delim: &str,
    ) -> Result<String, String> {
        match self {
            PartitionerKind::Default => Ok(format!("partition={partition}")),
            PartitionerKind::Field(fields) => {
                let value = value.ok_or("the field partitioner needs a value")?;
                let mut parts = Vec::with_capacity(fields.len());
                for field in fields {
                    let text = match lookup(value, field) {
                        None => return Err(format!("the value has no partition field '{field}'")),
                        Some(Data::String(s)) => s.clone(),
                        Some(Data::Boolean(b)) => b.to_string(),
                        Some(data) => match data.as_i64() {
                            Some(i) => i.to_string(),
                            None => {
                                return Err(format!(
                                    "partition field '{field}' holds {}; only strings, integers and booleans can name a directory",
                                    data.kind()
                                ));
                            }
                        },
                    };
                    // A value cannot add directories of its own, nor escape the prefix.
                    if text.is_empty() || text == "." || text == ".." || text.contains('/') || text.contains(delim) {
                        return Err(format!("partition field '{field}' holds '{text}', which cannot name a directory"));
                    }
                    parts.push(format!("{field}={text}"));
                }
                Ok(parts.join(delim))
            }
            PartitionerKind::Time { duration_ms, format } => {
                let time = time()?;
                let start = window_start(time, *duration_ms, format.timezone);
                format.format(start).ok_or_else(|| format!("time {time} cannot be formatted"))
            }
        }
    }

    pub fn needs_value(&self) -> bool {
        matches!(self, PartitionerKind::Field(_))
    }
}

/// Offset of `tz` from UTC at `ms`, in ms.
fn offset_ms(tz: Tz, ms: i64) -> i64 {
    match tz.timestamp_millis_opt(ms).single() {
        Some(t) => t.offset().fix().local_minus_utc() as i64 * 1000,
        None => 0,
    }
}

/// The UTC instant of a local wall-clock time in `tz` (the earlier one when
/// a clock change repeats it; across a gap, the offset before the gap).
fn local_to_utc(tz: Tz, local_ms: i64) -> i64 {
    let Some(naive) = DateTime::from_timestamp_millis(local_ms).map(|t| t.naive_utc()) else { return local_ms };
    match tz.from_local_datetime(&naive).earliest() {
        Some(t) => t.timestamp_millis(),
        None => local_ms - offset_ms(tz, local_ms - 3_600_000),
    }
}

/// The start of the `duration_ms` window holding `ms`, windows counted from
/// local midnight of 1970-01-01 in `tz` (Confluent's `TimeBasedPartitioner`).
pub fn window_start(ms: i64, duration_ms: i64, tz: Tz) -> i64 {
    let local = ms + offset_ms(tz, ms);
    local_to_utc(tz, local.div_euclid(duration_ms) * duration_ms)
}

/// The first multiple of `interval_ms` since local midnight (in `tz`) that
/// is after `now_ms`: when a scheduled rotation fires.
pub fn next_scheduled(now_ms: i64, interval_ms: i64, tz: Tz) -> i64 {
    let local = now_ms + offset_ms(tz, now_ms);
    let midnight = local_to_utc(tz, local.div_euclid(86_400_000) * 86_400_000);
    midnight + ((now_ms - midnight).div_euclid(interval_ms) + 1) * interval_ms
}

/// A Joda-Time pattern (`'year'=YYYY/'month'=MM`), turned into chrono's
/// strftime items once, and formatted in a time zone and locale.
#[derive(Clone, Debug)]
pub struct PathFormat {
    strftime: String,
    pub timezone: Tz,
    locale: Locale,
}

impl PathFormat {
    pub fn parse(pattern: &str, timezone: Tz, locale: Locale) -> Result<PathFormat, String> {
        let mut out = String::new();
        let chars: Vec<char> = pattern.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                // '' is a quote; 'text' is literal text.
                if chars.get(i + 1) == Some(&'\'') {
                    out.push('\'');
                    i += 2;
                    continue;
                }
                // Inside quotes, '' is a quote too.
                i += 1;
                loop {
                    match (chars.get(i), chars.get(i + 1)) {
                        (None, _) => return Err("an unclosed quote in path.format".into()),
                        (Some('\''), Some('\'')) => {
                            out.push('\'');
                            i += 2;
                        }
                        (Some('\''), _) => break,
                        (Some(&c), _) => {
                            push_literal(&mut out, c);
                            i += 1;
                        }
                    }
                }
                i += 1;
                continue;
            }
            if !c.is_ascii_alphabetic() {
                push_literal(&mut out, c);
                i += 1;
                continue;
            }
            let n = chars[i..].iter().take_while(|&&d| d == c).count();
            let spec = match (c, n) {
                ('y' | 'Y' | 'u', 2) => "%y",
                ('y' | 'Y' | 'u', _) => "%Y",
                ('x', 2) => "%g",
                ('x', _) => "%G",
                ('M', 1) => "%-m",
                ('M', 2) => "%m",
                ('M', 3) => "%b",
                ('M', _) => "%B",
                ('d', 1) => "%-d",
                ('d', _) => "%d",
                ('D', 1 | 2) => "%-j",
                ('D', _) => "%j",
                ('H', 1) => "%-H",
                ('H', _) => "%H",
                ('k', 1) => "%-k",
                ('k', _) => "%k",
                ('h', 1) => "%-I",
                ('h', _) => "%I",
                ('m', 1) => "%-M",
                ('m', _) => "%M",
                ('s', 1) => "%-S",
                ('s', _) => "%S",
                ('S', _) => "%3f",
                ('E', 1..=3) => "%a",
                ('E', _) => "%A",
                ('e', _) => "%u",
                ('a', _) => "%p",
                ('w', 1) => "%-V",
                ('w', _) => "%V",
                ('Z', 1) => "%z",
                ('Z', _) => "%:z",
                ('z', _) => "%Z",
                _ => {
                    return Err(format!(
                        "'{}' in path.format is not a pattern letter this sink knows",
                        c.to_string().repeat(n)
                    ));
                }
            };
            // Joda's `k` is 1-24; chrono's %k pads 0-23 with a space, so give the hour plainly.
            let spec = if c == 'k' { if n == 1 { "%-H" } else { "%H" } } else { spec };
            out.push_str(spec);
            i += n;
        }
        let format = PathFormat { strftime: out, timezone, locale };
        // chrono checks a pattern only when it formats: try one now.
        format.format(0).ok_or_else(|| format!("path.format '{pattern}' cannot be used"))?;
        Ok(format)
    }

    /// `ms` in the pattern, time zone and locale; `None` if the time is out of range.
    pub fn format(&self, ms: i64) -> Option<String> {
        use std::fmt::Write;
        let time = self.timezone.timestamp_millis_opt(ms).single()?;
        let mut out = String::new();
        write!(out, "{}", time.format_localized(&self.strftime, self.locale)).ok()?;
        Some(out)
    }
}

fn push_literal(out: &mut String, c: char) {
    if c == '%' {
        out.push_str("%%");
    } else {
        out.push(c);
    }
}

/// A locale by a Java-style name: `fr`, `fr_FR`, `pt-BR`, `en`.
pub fn locale_of(name: &str) -> Option<Locale> {
    let name = name.trim().replace('-', "_");
    if let Ok(locale) = Locale::try_from(name.as_str()) {
        return Some(locale);
    }
    let (language, region) = name.split_once('_').unwrap_or((&name, ""));
    let language = language.to_ascii_lowercase();
    let candidates: Vec<String> = if !region.is_empty() {
        vec![format!("{language}_{}", region.to_ascii_uppercase())]
    } else {
        // The language's main country, where it is not the language's own code upper-cased.
        let main = match language.as_str() {
            "en" => "US",
            "ja" => "JP",
            "zh" => "CN",
            "ko" => "KR",
            "sv" => "SE",
            "da" => "DK",
            "el" => "GR",
            "cs" => "CZ",
            "uk" => "UA",
            "he" => "IL",
            "nb" | "nn" => "NO",
            "ar" => "SA",
            "hi" => "IN",
            "vi" => "VN",
            "et" => "EE",
            "ca" => "ES",
            "sl" => "SI",
            "ga" => "IE",
            "ms" => "MY",
            "fa" => "IR",
            "sr" => "RS",
            "be" => "BY",
            "ka" => "GE",
            "hy" => "AM",
            "kk" => "KZ",
            other => return Locale::try_from(format!("{other}_{}", other.to_ascii_uppercase()).as_str()).ok(),
        };
        vec![format!("{language}_{main}")]
    };
    candidates.iter().find_map(|c| Locale::try_from(c.as_str()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_sdk::data::read_value;

    fn at(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text).unwrap().timestamp_millis()
    }

    fn time(pattern: &str, tz: &str, locale: &str, duration_ms: i64) -> PartitionerKind {
        let tz: Tz = tz.parse().unwrap();
        PartitionerKind::Time {
            duration_ms,
            format: PathFormat::parse(pattern, tz, locale_of(locale).unwrap()).unwrap(),
        }
    }

    #[test]
    fn default_and_field_partitioners() {
        let value =
            read_value(br#"{"region": "eu", "n": 7, "ok": true, "inner": {"shard": 3}, "f": 1.5}"#).unwrap().data;
        let never = || -> Result<i64, String> { panic!("no time needed") };
        assert_eq!(PartitionerKind::Default.encode(4, None, never, "/").unwrap(), "partition=4");
        let fields = PartitionerKind::Field(vec!["region".into(), "n".into(), "ok".into(), "inner.shard".into()]);
        assert_eq!(fields.encode(0, Some(&value), never, "/").unwrap(), "region=eu/n=7/ok=true/inner.shard=3");
        assert_eq!(fields.encode(0, Some(&value), never, "_").unwrap(), "region=eu_n=7_ok=true_inner.shard=3");
        let err = PartitionerKind::Field(vec!["missing".into()]).encode(0, Some(&value), never, "/").unwrap_err();
        assert_eq!(err, "the value has no partition field 'missing'");
        let err = PartitionerKind::Field(vec!["f".into()]).encode(0, Some(&value), never, "/").unwrap_err();
        assert!(err.contains("holds float64"), "{err}");
        let sneaky = read_value(br#"{"region": "../x"}"#).unwrap().data;
        assert!(PartitionerKind::Field(vec!["region".into()]).encode(0, Some(&sneaky), never, "/").is_err());
    }

    #[test]
    fn time_partitioner_in_a_time_zone() {
        let hourly = time("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", "UTC", "en", 3_600_000);
        let t = at("2024-03-09T23:59:59.999Z");
        assert_eq!(hourly.encode(0, None, || Ok(t), "/").unwrap(), "year=2024/month=03/day=09/hour=23");
        // Paris is UTC+1 in March: the same instant is already the 10th there.
        let paris = time("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", "Europe/Paris", "en", 3_600_000);
        assert_eq!(paris.encode(0, None, || Ok(t), "/").unwrap(), "year=2024/month=03/day=10/hour=00");
        // Daily windows start at local midnight: 23:30 UTC on the 9th is the 10th in Paris.
        let daily = time("YYYY-MM-dd'T'HH:mm", "Europe/Paris", "en", 86_400_000);
        assert_eq!(daily.encode(0, None, || Ok(at("2024-03-09T23:30:00Z")), "/").unwrap(), "2024-03-10T00:00");
        // A 15-minute window.
        let quarter = time("HH:mm", "UTC", "en", 900_000);
        assert_eq!(quarter.encode(0, None, || Ok(at("2024-03-09T10:44:00Z")), "/").unwrap(), "10:30");
        // Kolkata is UTC+05:30: windows align to its local hours.
        let kolkata = time("dd'-'HH", "Asia/Kolkata", "en", 3_600_000);
        assert_eq!(kolkata.encode(0, None, || Ok(at("2024-03-09T10:44:00Z")), "/").unwrap(), "09-16");
    }

    #[test]
    fn path_format_names_months_and_days_in_the_locale() {
        let t = at("2024-08-05T08:00:00Z");
        let fr = time("MMMM/EEEE/MMM/E", "UTC", "fr", 86_400_000);
        assert_eq!(fr.encode(0, None, || Ok(t), "/").unwrap(), "août/lundi/août/lun.");
        let en = time("MMMM/EEEE/'q''s'/''/D/a", "UTC", "en", 86_400_000);
        assert_eq!(en.encode(0, None, || Ok(t), "/").unwrap(), "August/Monday/q's/'/218/AM");
        let de = time("d. MMMM", "UTC", "de-DE", 86_400_000);
        assert_eq!(de.encode(0, None, || Ok(t), "/").unwrap(), "5. August");
        assert!(PathFormat::parse("'unclosed", Tz::UTC, Locale::en_US).is_err());
        assert!(PathFormat::parse("YYYY/qq", Tz::UTC, Locale::en_US).unwrap_err().contains("'qq'"));
        assert!(locale_of("xx_YY").is_none());
    }

    #[test]
    fn extractors() {
        let value =
            read_value(br#"{"ts": 1000, "iso": "2024-01-02T03:04:05.678+01:00", "day": "2024-01-02", "name": "x"}"#)
                .unwrap()
                .data;
        assert_eq!(Extractor::Wallclock.time(5, Some(&value), 99), Ok(99));
        assert_eq!(Extractor::Record.time(5, Some(&value), 99), Ok(5));
        assert!(Extractor::Record.time(-1, Some(&value), 99).is_err());
        assert_eq!(Extractor::RecordField("ts".into()).time(5, Some(&value), 99), Ok(1000));
        assert_eq!(Extractor::RecordField("iso".into()).time(5, Some(&value), 99), Ok(at("2024-01-02T02:04:05.678Z")));
        assert_eq!(Extractor::RecordField("day".into()).time(5, Some(&value), 99), Ok(at("2024-01-02T00:00:00Z")));
        assert!(Extractor::RecordField("name".into()).time(5, Some(&value), 99).is_err());
        assert!(Extractor::RecordField("none".into()).time(5, None, 99).is_err());
    }

    #[test]
    fn scheduled_rotation_aligns_to_the_interval_in_the_time_zone() {
        let utc = next_scheduled(at("2024-03-09T10:44:00Z"), 3_600_000, Tz::UTC);
        assert_eq!(utc, at("2024-03-09T11:00:00Z"));
        // Kolkata's hours start at :30 UTC.
        let kolkata = next_scheduled(at("2024-03-09T10:44:00Z"), 3_600_000, "Asia/Kolkata".parse().unwrap());
        assert_eq!(kolkata, at("2024-03-09T11:30:00Z"));
        // Exactly on a boundary: the next one.
        assert_eq!(next_scheduled(at("2024-03-09T11:00:00Z"), 3_600_000, Tz::UTC), at("2024-03-09T12:00:00Z"));
    }
}
