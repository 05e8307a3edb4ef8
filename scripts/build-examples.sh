#!/usr/bin/env bash
# Builds the example sinks in other languages (examples/) as WebAssembly
# components:
#
#   target/example-plugins/python-sink.wasm           examples/python (componentize-py)
#   target/example-plugins/python-noop-sink.wasm      examples/python/noop
#   target/example-plugins/python-redact.wasm         examples/python/transform (a transform)
#   target/example-plugins/python-redact-0.2.0.wasm   the same, as version 0.2.0 (for hot swaps)
#   target/example-plugins/javascript-sink.wasm       examples/javascript (componentize-js)
#   target/example-plugins/javascript-noop-sink.wasm  examples/javascript/noop
#   target/example-plugins/javascript-redact.wasm     examples/javascript/transform (a transform)
#
# The noop sinks are the smallest sink in each language: templates, and the
# benchmarks' measure of a language's cost per `put` before any work.
#
# Not into target/plugins: that is the first-party plugins' folder, which the
# host's tests scan (and whose plugin list they check), and each of these
# components takes 10 to 20 s to compile. To try one in a worker, copy it into
# the worker's --plugin-dir.
#
# Installs the toolchains when they are missing: componentize-py (pinned, by
# pip; see examples/python/build.sh) and the JavaScript packages
# (`npm ci` in examples/javascript, from its package-lock.json). Needs
# python3 with pip, and node (20 or newer) with npm. Each component is
# rebuilt only when its sources or the WIT changed, so a second run takes
# about a second.
#
#   scripts/build-examples.sh [python] [javascript]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
OUT=target/example-plugins
mkdir -p "$OUT"

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(python javascript)

for example in "${want[@]}"; do
  case "$example" in
    python)
      examples/python/build.sh "$ROOT/$OUT/python-sink.wasm"
      examples/python/build.sh "$ROOT/$OUT/python-noop-sink.wasm" examples/python/noop
      examples/python/build.sh "$ROOT/$OUT/python-redact.wasm" examples/python/transform transform
      # A second build, told apart by its version only: what a hot swap of
      # a transform moves to in host/tests/transform_plugins.rs.
      next=target/tmp/python-redact-0.2.0
      mkdir -p "$next"
      if [ ! -f "$next/app.py" ] || [ examples/python/transform/app.py -nt "$next/app.py" ]; then
        sed 's/^VERSION = "0.1.0"$/VERSION = "0.2.0"/' examples/python/transform/app.py >"$next/app.py"
      fi
      examples/python/build.sh "$ROOT/$OUT/python-redact-0.2.0.wasm" "$next" transform
      ;;
    javascript)
      js=examples/javascript
      # npm ci writes node_modules/.package-lock.json: the packages are
      # installed and match the lock when it is newer than the lock.
      if [ ! -f "$js/node_modules/.package-lock.json" ] || [ "$js/package-lock.json" -nt "$js/node_modules/.package-lock.json" ] \
        || [ "$js/package.json" -nt "$js/node_modules/.package-lock.json" ]; then
        echo "javascript-sink: npm ci in $js" >&2
        (cd "$js" && npm ci --no-audit --no-fund --loglevel=error)
      fi
      node "$js/build.mjs" "$ROOT/$OUT/javascript-sink.wasm"
      node "$js/build.mjs" "$ROOT/$OUT/javascript-noop-sink.wasm" "$js/noop/sink.js"
      node "$js/build.mjs" "$ROOT/$OUT/javascript-redact.wasm" "$js/transform/transform.js" transform
      ;;
    *)
      echo "unknown example '$example' (known: python, javascript)" >&2
      exit 2
      ;;
  esac
done
