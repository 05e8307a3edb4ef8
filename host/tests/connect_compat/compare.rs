//! Comparing two answers to the same step: first each is normalised (its
//! own names, topics, files and plugin become placeholders, and the rules
//! of `normalise.rs` apply), then the two are walked side by side and every
//! difference of status code, key, type or value is listed, to be checked
//! against the allow-list (`tests/connect-compat/allow-list.md`).

use crate::normalise;
use crate::sequence::Answer;
use crate::targets::Target;
use serde_json::Value;

/// One difference between Connect's answer and Spillway's.
pub struct Difference {
    /// `standalone` or `distributed`.
    pub mode: &'static str,
    pub step: &'static str,
    /// `status`, or a JSON pointer into the body (`/` is the whole body).
    pub at: String,
    pub connect: String,
    pub spillway: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}: Connect {} | Spillway {}", self.mode, self.step, self.at, self.connect, self.spillway)
    }
}

/// Every difference between the two runs of the sequence.
pub fn differences(
    mode: &'static str,
    connect: (&Target, &[Answer]),
    spillway: (&Target, &[Answer]),
) -> Vec<Difference> {
    let mut found = Vec::new();
    for (c, s) in connect.1.iter().zip(spillway.1) {
        assert_eq!(c.step, s.step, "the sequences ran apart");
        let mut push = |at: String, connect: String, spillway: String| {
            found.push(Difference { mode, step: c.step, at, connect, spillway })
        };
        if c.timed_out.is_some() || s.timed_out.is_some() {
            let say = |a: &Answer| a.timed_out.clone().unwrap_or_else(|| "reached it".into());
            push("wait".into(), say(c), say(s));
        }
        if c.status != s.status {
            push("status".into(), c.status.to_string(), s.status.to_string());
        }
        let c_body = normalise::answer(c.step, &c.body, connect.0);
        let s_body = normalise::answer(s.step, &s.body, spillway.0);
        walk("", &c_body, &s_body, &mut push);
    }
    found
}

const ABSENT: &str = "(absent)";

fn walk(at: &str, connect: &Value, spillway: &Value, push: &mut impl FnMut(String, String, String)) {
    let here = || if at.is_empty() { "/".to_string() } else { at.to_string() };
    match (connect, spillway) {
        (Value::Object(c), Value::Object(s)) => {
            for (key, c_value) in c {
                let path = format!("{at}/{}", escape(key));
                match s.get(key) {
                    Some(s_value) => walk(&path, c_value, s_value, push),
                    None => push(path, brief(c_value), ABSENT.into()),
                }
            }
            for (key, s_value) in s.iter().filter(|(key, _)| !c.contains_key(*key)) {
                push(format!("{at}/{}", escape(key)), ABSENT.into(), brief(s_value));
            }
        }
        (Value::Array(c), Value::Array(s)) if c.len() == s.len() => {
            for (i, (c_item, s_item)) in c.iter().zip(s).enumerate() {
                walk(&format!("{at}/{i}"), c_item, s_item, push);
            }
        }
        (Value::Array(c), Value::Array(s)) => {
            push(format!("{}#len", here()), c.len().to_string(), s.len().to_string());
        }
        (c, s) if c == s => {}
        (c, s) => push(here(), brief(c), brief(s)),
    }
}

/// A JSON pointer's escaping of a key.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A value short enough for one line.
fn brief(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 120 { format!("{}…", text.chars().take(120).collect::<String>()) } else { text }
}

/// `*` matches any run of characters, including none.
pub fn glob(pattern: &str, text: &str) -> bool {
    let Some((head, rest)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(text) = text.strip_prefix(head) else {
        return false;
    };
    (0..=text.len()).filter(|i| text.is_char_boundary(*i)).any(|i| glob(rest, &text[i..]))
}
