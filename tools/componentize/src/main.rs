//! `spillway-componentize IN.wasm OUT.wasm`: wraps a core module built for
//! `wasm32-wasip1` into a component, adapting its WASI preview 1 imports to
//! WASI 0.2. Needed only where the `wasm32-wasip2` target (which emits a
//! component directly) is not installed.

use anyhow::{Context, Result, bail};
use wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
use wit_component::ComponentEncoder;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        bail!("usage: spillway-componentize IN.wasm OUT.wasm");
    };
    let core = std::fs::read(input).with_context(|| format!("reading {input}"))?;
    let component = ComponentEncoder::default()
        .module(&core)?
        .adapter("wasi_snapshot_preview1", WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER)?
        .validate(true)
        .encode()
        .with_context(|| format!("componentizing {input}"))?;
    std::fs::write(output, component).with_context(|| format!("writing {output}"))?;
    Ok(())
}
