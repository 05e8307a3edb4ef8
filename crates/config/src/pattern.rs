//! Key names that stand for many keys: `plugin.grant.fs.<name>.path`,
//! `consumer.override.*`.

/// What a `<placeholder>` segment of a key pattern accepts. A segment never
/// holds a dot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment {
    /// `[a-z0-9-]+`: a name the user picks, such as a grant's.
    Slug,
    /// `[A-Za-z_][A-Za-z0-9_]*`: an environment variable's name.
    EnvVarName,
}

impl Segment {
    pub fn matches(self, segment: &str) -> bool {
        match self {
            Segment::Slug => {
                !segment.is_empty()
                    && segment.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            }
            Segment::EnvVarName => {
                segment.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                    && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            }
        }
    }

    /// The segment's grammar, for documentation.
    pub fn grammar(self) -> &'static str {
        match self {
            Segment::Slug => "[a-z0-9-]+",
            Segment::EnvVarName => "[A-Za-z_][A-Za-z0-9_]*",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Placeholder {
        label: String,
        segment: Segment,
    },
    /// A trailing `*`: whatever non-empty rest, dots included.
    Rest,
}

/// A key name, split on dots; exact when it has neither placeholders nor `*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Pattern {
    parts: Vec<Part>,
}

impl Pattern {
    /// Panics on a malformed name: tables are written by hand, and a test
    /// builds each one.
    pub fn parse(name: &str) -> Pattern {
        let segments: Vec<&str> = name.split('.').collect();
        let last = segments.len() - 1;
        let parts = segments
            .iter()
            .enumerate()
            .map(|(i, &segment)| {
                if let Some(label) = segment.strip_prefix('<').and_then(|s| s.strip_suffix('>')) {
                    assert!(Segment::EnvVarName.matches(label), "key pattern '{name}': bad placeholder <{label}>");
                    Part::Placeholder { label: label.to_string(), segment: Segment::Slug }
                } else if segment == "*" && i == last {
                    Part::Rest
                } else {
                    assert!(
                        !segment.is_empty() && !segment.contains(['<', '>', '*']),
                        "key pattern '{name}': bad segment '{segment}'"
                    );
                    Part::Literal(segment.to_string())
                }
            })
            .collect();
        Pattern { parts }
    }

    /// Gives placeholder `<label>` another grammar than [`Segment::Slug`].
    pub fn set_segment(&mut self, label: &str, segment: Segment) {
        let mut found = false;
        for part in &mut self.parts {
            if let Part::Placeholder { label: l, segment: s } = part
                && l == label
            {
                *s = segment;
                found = true;
            }
        }
        assert!(found, "no placeholder <{label}> in this key pattern");
    }

    pub fn is_exact(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Literal(_)))
    }

    pub fn matches(&self, key: &str) -> bool {
        let mut segments = key.split('.');
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Rest => {
                    // Each earlier part took one segment; the rest is what follows.
                    let rest = key.splitn(i + 1, '.').nth(i).unwrap_or("");
                    return !rest.is_empty();
                }
                Part::Literal(literal) => {
                    if segments.next() != Some(literal.as_str()) {
                        return false;
                    }
                }
                Part::Placeholder { segment, .. } => {
                    if !segments.next().is_some_and(|s| segment.matches(s)) {
                        return false;
                    }
                }
            }
        }
        segments.next().is_none()
    }

    /// The placeholders, with the grammar of each.
    pub fn placeholders(&self) -> impl Iterator<Item = (&str, Segment)> {
        self.parts.iter().filter_map(|p| match p {
            Part::Placeholder { label, segment } => Some((label.as_str(), *segment)),
            _ => None,
        })
    }

    pub fn has_rest(&self) -> bool {
        self.parts.last() == Some(&Part::Rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_names_match_only_themselves() {
        let p = Pattern::parse("tasks.max");
        assert!(p.is_exact());
        assert!(p.matches("tasks.max"));
        for other in ["tasks", "tasks.max.x", "tasks.maxx", "xtasks.max", ""] {
            assert!(!p.matches(other), "{other}");
        }
    }

    #[test]
    fn a_slug_placeholder_is_one_lowercase_segment() {
        let p = Pattern::parse("plugin.grant.fs.<name>.path");
        assert!(!p.is_exact());
        for key in ["plugin.grant.fs.logs.path", "plugin.grant.fs.a-1.path", "plugin.grant.fs.0.path"] {
            assert!(p.matches(key), "{key}");
        }
        for key in [
            "plugin.grant.fs..path",
            "plugin.grant.fs.Logs.path",
            "plugin.grant.fs.my_dir.path",
            "plugin.grant.fs.a.b.path",
            "plugin.grant.fs.logs.path.x",
            "plugin.grant.fs.logs",
            "plugin.grant.net.logs.path",
        ] {
            assert!(!p.matches(key), "{key}");
        }
    }

    #[test]
    fn a_placeholder_may_take_another_grammar() {
        let mut p = Pattern::parse("plugin.grant.env.<NAME>");
        assert!(!p.matches("plugin.grant.env.API_URL"), "a slug by default");
        p.set_segment("NAME", Segment::EnvVarName);
        for key in ["plugin.grant.env.API_URL", "plugin.grant.env._x", "plugin.grant.env.a1"] {
            assert!(p.matches(key), "{key}");
        }
        for key in ["plugin.grant.env.1A", "plugin.grant.env.A-B", "plugin.grant.env.A.value", "plugin.grant.env."] {
            assert!(!p.matches(key), "{key}");
        }
    }

    #[test]
    fn a_trailing_star_matches_any_non_empty_rest() {
        let p = Pattern::parse("consumer.override.*");
        assert!(p.has_rest());
        for key in ["consumer.override.fetch.min.bytes", "consumer.override.x", "consumer.override.A_B"] {
            assert!(p.matches(key), "{key}");
        }
        for key in ["consumer.override.", "consumer.override", "consumer.overrides.x", "producer.override.x"] {
            assert!(!p.matches(key), "{key}");
        }
    }

    #[test]
    #[should_panic(expected = "bad segment")]
    fn a_star_inside_a_name_is_refused() {
        Pattern::parse("a.*.b");
    }
}
