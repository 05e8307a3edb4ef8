//! `spillway:types/errors`: the one retriable / fatal classification that
//! every capability returns and every plugin call may fail with.

pub const PACKAGE: &str = "spillway:types";
pub const VERSION: &str = "0.1.0";

/// Every plugin gets it.
pub const CAPABILITY: crate::Capability =
    crate::Capability { package: PACKAGE, version: VERSION, interfaces: &["errors"], grant: None };

pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "spillway:types/imports",
    });
}

pub use bindings::spillway::types::errors::Error;

/// Links the type-only interface: it has no functions, but a plugin that
/// uses its types imports it.
pub fn add_to_linker<T: 'static>(linker: &mut wasmtime::component::Linker<T>) -> anyhow::Result<()> {
    linker.instance(&format!("{PACKAGE}/errors@{VERSION}"))?;
    Ok(())
}

impl Error {
    pub fn retriable(message: impl Into<String>) -> Self {
        Error::Retriable(message.into())
    }

    pub fn fatal(message: impl Into<String>) -> Self {
        Error::Fatal(message.into())
    }

    pub fn is_retriable(&self) -> bool {
        matches!(self, Error::Retriable(_))
    }

    pub fn message(&self) -> &str {
        match self {
            Error::Retriable(m) | Error::Fatal(m) => m,
        }
    }
}
