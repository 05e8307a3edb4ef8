//! How a failed command tells the shell what failed: one exit code per kind
//! of failure, so that a script can tell a refused request from a server
//! that is down.

use std::fmt;

/// What failed. Exit code 2 is clap's, for a command line it cannot parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Something on this side: a file that cannot be read or is not what the
    /// command needs, a URL that is not one.
    Local,
    /// The server refused the request (HTTP 4xx): a bad request, a
    /// connector or plugin it does not know, a conflict.
    Refused,
    /// The server failed (HTTP 5xx) or answered something that is not the
    /// API's.
    Server,
    /// The server could not be reached, or did not finish its answer.
    Unreachable,
    /// `connectors validate`: the server checked the config and found errors.
    Invalid,
}

impl ErrorKind {
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Local => 1,
            ErrorKind::Refused => 3,
            ErrorKind::Server => 4,
            ErrorKind::Unreachable => 5,
            ErrorKind::Invalid => 6,
        }
    }
}

/// For `spillway --help`; the README lists the same.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  a local error: a file that cannot be read or is not what the command needs
  2  a command line that does not parse
  3  the server refused the request (HTTP 4xx: bad request, not found, conflict)
  4  the server failed (HTTP 5xx) or answered something that is not the API's
  5  the server could not be reached
  6  connectors validate: the config has errors";

#[derive(Debug)]
pub struct CliError {
    pub kind: ErrorKind,
    /// For stderr.
    pub message: String,
    /// For stdout all the same: the report behind an `Invalid` config, which
    /// a script reads as much as a person does.
    pub output: Option<String>,
}

impl CliError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CliError { kind, message: message.into(), output: None }
    }

    pub fn local(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Local, message)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_exit_code() {
        let kinds =
            [ErrorKind::Local, ErrorKind::Refused, ErrorKind::Server, ErrorKind::Unreachable, ErrorKind::Invalid];
        for kind in kinds {
            assert!(EXIT_CODES.contains(&format!("\n  {}  ", kind.exit_code())), "{kind:?} is not in EXIT_CODES");
        }
    }
}
