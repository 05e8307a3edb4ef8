#!/usr/bin/env bash
# Builds the first-party plugins as WebAssembly components into target/plugins/.
#
# The ordinary route: `rustup target add wasm32-wasip2`, then cargo emits
# components directly. Where that target cannot be installed (no network to
# rustup's servers), fall back to Debian's Rust with its std source, build for
# wasm32-wasip1 with -Zbuild-std, and componentize with the WASI adapter.
#
# target/plugins-extra/ gets builds that tests install on purpose: a second
# version of misbehave (0.2.0), for versioned installs and hot swaps.
# target/example-plugins/ gets the Rust examples (examples/rust/), beside the
# other languages' (scripts/build-examples.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PLUGINS=(noop-sink file-sink misbehave object-sink s3-sink sql-sink mirror)
EXAMPLES=(rust-redact)
OUT=target/plugins
EXTRA=target/plugins-extra
EXAMPLE_OUT=target/example-plugins
mkdir -p "$OUT" "$EXTRA" "$EXAMPLE_OUT"
pkgs=()
for p in "${PLUGINS[@]}" "${EXAMPLES[@]}"; do pkgs+=(-p "$p"); done

have_wasip2() {
  command -v rustup >/dev/null && rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2
}

if ! have_wasip2 && command -v rustup >/dev/null && [ -z "${SPILLWAY_NO_RUSTUP_TARGET:-}" ]; then
  # May hang without network: bound it.
  timeout 20 rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
fi

if have_wasip2; then
  echo "building plugins for wasm32-wasip2" >&2
  CARGO_PROFILE_RELEASE_DEBUG=false cargo build --release --target wasm32-wasip2 "${pkgs[@]}"
  for p in "${PLUGINS[@]}"; do
    cp "target/wasm32-wasip2/release/${p//-/_}.wasm" "$OUT/$p.wasm"
  done
  for p in "${EXAMPLES[@]}"; do
    cp "target/wasm32-wasip2/release/${p//-/_}.wasm" "$EXAMPLE_OUT/$p.wasm"
  done
  MISBEHAVE_VERSION=0.2.0 CARGO_PROFILE_RELEASE_DEBUG=false cargo build --release --target wasm32-wasip2 -p misbehave
  cp target/wasm32-wasip2/release/misbehave.wasm "$EXTRA/misbehave-0.2.0.wasm"
else
  echo "wasm32-wasip2 not installable here: using Debian's Rust with -Zbuild-std" >&2
  if [ ! -x /usr/bin/cargo ] || [ ! -d /usr/lib/rustlib/src/rust ] || [ ! -d /usr/lib/wasm32-wasi ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      rustc-web cargo-web rust-web-src lld-22 wasi-libc >/dev/null
  fi
  CARGO_PROFILE_RELEASE_DEBUG=false RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 RUSTFLAGS="-L native=/usr/lib/wasm32-wasi" \
    /usr/bin/cargo build --release --target wasm32-wasip1 -Zbuild-std=std,panic_abort "${pkgs[@]}"
  cargo build --release -q -p spillway-componentize
  for p in "${PLUGINS[@]}"; do
    target/release/spillway-componentize "target/wasm32-wasip1/release/${p//-/_}.wasm" "$OUT/$p.wasm"
  done
  for p in "${EXAMPLES[@]}"; do
    target/release/spillway-componentize "target/wasm32-wasip1/release/${p//-/_}.wasm" "$EXAMPLE_OUT/$p.wasm"
  done
  MISBEHAVE_VERSION=0.2.0 CARGO_PROFILE_RELEASE_DEBUG=false RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 \
    RUSTFLAGS="-L native=/usr/lib/wasm32-wasi" \
    /usr/bin/cargo build --release --target wasm32-wasip1 -Zbuild-std=std,panic_abort -p misbehave
  target/release/spillway-componentize target/wasm32-wasip1/release/misbehave.wasm "$EXTRA/misbehave-0.2.0.wasm"
fi
ls -l "$OUT"/*.wasm "$EXTRA"/*.wasm "$EXAMPLE_OUT"/rust-*.wasm >&2
