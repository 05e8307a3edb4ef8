#!/usr/bin/env bash
# Builds a Python sink into a WebAssembly component with componentize-py.
#
#   examples/python/build.sh [OUTPUT.wasm [APP_DIR [WORLD]]]
#
# APP_DIR holds the plugin's app.py (default: this directory's, python-sink;
# examples/python/noop is python-noop-sink, examples/python/transform the
# transform python-redact). WORLD is the contract's world it is built for:
# sink (the default) or transform. Default output:
# target/example-plugins/python-sink.wasm at the repository's root.
# Uses componentize-py from PATH when it is the pinned version; otherwise pip
# installs that version into target/tools/ (with --target: no root, no
# virtualenv, and Debian 12's externally managed Python allows it).
# Does nothing when the output is newer than app.py, this script, the WIT and
# the Python SDK layer (sdk/python), which the component embeds.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${1:-$ROOT/target/example-plugins/python-sink.wasm}"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
APP="$(cd "${2:-$HERE}" && pwd)"
WORLD="${3:-sink}"
NAME="$(basename "$OUT" .wasm)"
VERSION=0.25.1
TOOLS="$ROOT/target/tools/componentize-py-$VERSION"

if [ -f "$OUT" ] && [ -z "$(find "$APP/app.py" "$HERE/build.sh" "$ROOT/wit" "$ROOT/sdk/python" -newer "$OUT" -print -quit)" ]; then
  echo "$NAME: $OUT is up to date" >&2
  exit 0
fi

if [ "$(componentize-py --version 2>/dev/null || true)" = "componentize-py $VERSION" ]; then
  cpy() { componentize-py "$@"; }
else
  if [ ! -x "$TOOLS/bin/componentize-py" ]; then
    echo "$NAME: installing componentize-py==$VERSION into $TOOLS" >&2
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location --root-user-action=ignore \
      --target "$TOOLS" "componentize-py==$VERSION"
  fi
  cpy() { PYTHONPATH="$TOOLS${PYTHONPATH:+:$PYTHONPATH}" python3 "$TOOLS/bin/componentize-py" "$@"; }
fi

mkdir -p "$(dirname "$OUT")"
cd "$APP"
SECONDS=0
# Into a temporary file first, so that a failed build leaves no half file
# that would look up to date.
cpy -d "$ROOT/wit" -w "$WORLD" componentize app -p "$APP" -p "$ROOT/sdk/python" -o "$OUT.tmp"
echo
mv "$OUT.tmp" "$OUT"
echo "$NAME: built $OUT ($(du -h "$OUT" | cut -f1), ${SECONDS} s)" >&2
