//! Logging into the host's `tracing` (the `log` capability, always granted).
//!
//! Outside WebAssembly (a plugin's own unit tests, native benchmarks) these
//! calls do nothing.

pub use crate::__private::bindings::spillway::log::log::Level;

/// Whether a message at `level` would be recorded by the host.
pub fn enabled(level: Level) -> bool {
    #[cfg(target_family = "wasm")]
    {
        crate::__private::bindings::spillway::log::log::enabled(level)
    }
    #[cfg(not(target_family = "wasm"))]
    {
        let _ = level;
        false
    }
}

pub fn log(level: Level, message: &str) {
    #[cfg(target_family = "wasm")]
    crate::__private::bindings::spillway::log::log::log(level, message);
    #[cfg(not(target_family = "wasm"))]
    let _ = (level, message);
}

pub fn info(message: &str) {
    log(Level::Info, message)
}

pub fn warn(message: &str) {
    log(Level::Warn, message)
}

pub fn error(message: &str) {
    log(Level::Error, message)
}

pub fn debug(message: &str) {
    if enabled(Level::Debug) {
        log(Level::Debug, message)
    }
}
