//! `topics.regex`: matched against whole names, and refused where the two
//! regex engines that apply it (the `regex` crate for share groups, glibc's
//! POSIX regex inside librdkafka for classic ones) would read it apart.

use regex::Regex;

/// A `topics.regex` as Connect applies it (Java's `matches()`): to the
/// whole topic name.
pub fn topics_pattern(regex: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^(?:{regex})$"))
}

/// Checks a `topics.regex`: valid for the `regex` crate (the share group's
/// client matches with it), and read the same by POSIX extended regex
/// (glibc's `regcomp`, which librdkafka subscribes a classic group with).
/// Both agree on literals, `.`, `[...]` with `[:class:]`, groups, `|`, the
/// greedy quantifiers and `\w \s \b`; what else Rust accepts, POSIX
/// lacks or reads otherwise (`\d` is a `d` there) and is refused here.
pub(super) fn check_topics_regex(regex: &str) -> Result<(), String> {
    if let Err(e) = Regex::new(regex) {
        let reason = e.to_string();
        let reason = reason.lines().find_map(|l| l.strip_prefix("error: ")).unwrap_or(&reason).to_string();
        return Err(format!("not a valid regular expression: {reason}"));
    }
    match posix_difference(regex) {
        Some(difference) => Err(format!("{difference} (librdkafka matches with POSIX extended regex)")),
        None => Ok(()),
    }
}

/// The first construct of a pattern (valid for the `regex` crate) that
/// POSIX extended regex lacks or reads differently.
fn posix_difference(regex: &str) -> Option<String> {
    let mut chars = regex.chars().peekable();
    let mut after_quantifier = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                // GNU regex reads \` and \' as anchors.
                Some(e) if (e.is_ascii_punctuation() && !"`'".contains(e)) || "wWsSbB".contains(e) => {}
                Some(e) => {
                    let instead = match e {
                        'd' => ": write [0-9]",
                        'D' => ": write [^0-9]",
                        _ => "",
                    };
                    return Some(format!("\\{e} is not POSIX{instead}"));
                }
                None => {}
            },
            '(' if chars.peek() == Some(&'?') => {
                return Some("(?...) is not POSIX: no flags, lookaround or non-capturing groups".into());
            }
            '?' if after_quantifier => return Some("lazy quantifiers (*?, +?, ??) are not POSIX".into()),
            '[' => {
                // `[^]...]` and `[]...]`: a leading `]` is a member.
                chars.next_if_eq(&'^');
                chars.next_if_eq(&']');
                let mut previous = None;
                while let Some(m) = chars.next() {
                    match m {
                        ']' => break,
                        '\\' => {
                            return Some(
                                "a \\ inside [...] is a backslash to POSIX: write members plainly (- last, ] first)"
                                    .into(),
                            );
                        }
                        '[' if chars.next_if_eq(&':').is_some() => {
                            if chars.next_if_eq(&'^').is_some() {
                                return Some("[:^class:] is not POSIX".into());
                            }
                            while chars.next().is_some_and(|c| c != ']') {}
                        }
                        '[' => return Some("a class inside [...] is not POSIX".into()),
                        '&' | '-' | '~' if previous == Some(m) => {
                            return Some(format!("{m}{m} inside [...] is not POSIX"));
                        }
                        _ => {}
                    }
                    previous = Some(m);
                }
            }
            _ => {}
        }
        after_quantifier = matches!(c, '*' | '+' | '?' | '}');
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_regex_must_read_the_same_to_posix() {
        for regex in [
            "orders-.*",
            "(orders|payments)-[0-9]+",
            "orders-[[:digit:]]+",
            "a\\.b",
            "a\\w+",
            "[]a-]+",
            "a{1,2}b?",
            "a[^.]b",
        ] {
            assert_eq!(check_topics_regex(regex), Ok(()), "{regex}");
        }
        for (regex, why) in [
            ("orders-\\d+", "\\d is not POSIX: write [0-9]"),
            ("(?:orders)", "(?...) is not POSIX"),
            ("(?i)orders", "(?...) is not POSIX"),
            ("orders-.+?", "lazy quantifiers"),
            ("orders-[0-9]{1,3}?", "lazy quantifiers"),
            ("orders[\\w-]", "a \\ inside [...]"),
            ("orders[a&&b]", "&& inside [...]"),
            ("orders[[:^digit:]]", "[:^class:]"),
            ("orders\\'", "\\' is not POSIX"),
        ] {
            let refused = check_topics_regex(regex).unwrap_err();
            assert!(
                refused.starts_with(why) && refused.ends_with("(librdkafka matches with POSIX extended regex)"),
                "{regex}: {refused}"
            );
        }
        // The regex crate itself has no lookaround.
        let lookahead = check_topics_regex("(?=o)orders").unwrap_err();
        assert!(lookahead.starts_with("not a valid regular expression: look-around"), "{lookahead}");
    }

    /// What `check_topics_regex` accepts, glibc's `regcomp` (which librdkafka
    /// matches a classic group's pattern with) reads as the `regex` crate
    /// does; and `\d`, which it refuses, glibc reads as a `d`.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn accepted_patterns_match_alike_in_glibc() {
        use std::ffi::{CString, c_char, c_int};
        /// Room for glibc's `regex_t` (64 bytes on 64-bit targets).
        #[repr(C, align(8))]
        struct RegexT([u8; 256]);
        unsafe extern "C" {
            fn regcomp(preg: *mut RegexT, pattern: *const c_char, cflags: c_int) -> c_int;
            fn regexec(
                preg: *const RegexT,
                string: *const c_char,
                nmatch: usize,
                pmatch: *mut u8,
                eflags: c_int,
            ) -> c_int;
            fn regfree(preg: *mut RegexT);
        }
        const REG_EXTENDED: c_int = 1;
        const REG_NOSUB: c_int = 8;
        // Anchored as `ClassicSource` hands it to librdkafka.
        let posix = |regex: &str, name: &str| -> bool {
            let pattern = CString::new(format!("^({regex})$")).unwrap();
            let name = CString::new(name).unwrap();
            let mut compiled = RegexT([0; 256]);
            // SAFETY: a buffer larger than regex_t, freed once compiled.
            unsafe {
                assert_eq!(regcomp(&mut compiled, pattern.as_ptr(), REG_EXTENDED | REG_NOSUB), 0, "{regex}");
                let matched = regexec(&compiled, name.as_ptr(), 0, std::ptr::null_mut(), 0) == 0;
                regfree(&mut compiled);
                matched
            }
        };
        let names = [
            "orders-1",
            "orders-12",
            "orders-d",
            "orders-",
            "orders_1",
            "orders.1",
            "xorders-1",
            "orders-1x",
            "payments-7",
            "a_b",
            "a-b",
            "ab",
            "a.b",
            "axb",
            "a",
            "aab",
            "]]",
        ];
        for regex in [
            "orders-.*",
            "(orders|payments)-[0-9]+",
            "orders-[[:digit:]]+",
            "a\\.b",
            "a\\w+",
            "[]a-]+",
            "a{1,2}b?",
            "a[^.]b",
            "orders|payments-7",
        ] {
            assert_eq!(check_topics_regex(regex), Ok(()), "{regex}");
            let rust = topics_pattern(regex).unwrap();
            for name in names {
                assert_eq!(posix(regex, name), rust.is_match(name), "{regex} on {name}");
            }
        }
        let digits = topics_pattern("orders-\\d+").unwrap();
        assert!(digits.is_match("orders-1") && !posix("orders-\\d+", "orders-1") && posix("orders-\\d+", "orders-d"));
    }
}
