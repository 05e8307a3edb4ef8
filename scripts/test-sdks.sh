#!/usr/bin/env bash
# Tests the Python and JavaScript SDK layers (sdk/python, sdk/javascript) on
# the host's own interpreters, against batches packed as the contract lays
# them out. The example sinks built on them run end to end through the host
# in host/tests/plugins.rs.
#
# Needs componentize-py (which examples/python/build.sh installs into
# target/tools/) for the Python bindings, and Node 20 or newer.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.25.1
TOOLS="target/tools/componentize-py-$VERSION"
BINDINGS=target/tmp/python-bindings
if [ "$(componentize-py --version 2>/dev/null || true)" = "componentize-py $VERSION" ]; then
  cpy() { componentize-py "$@"; }
else
  cpy() { PYTHONPATH="$TOOLS${PYTHONPATH:+:$PYTHONPATH}" python3 "$TOOLS/bin/componentize-py" "$@"; }
fi
rm -rf "$BINDINGS"
cpy -d wit -w sink bindings "$BINDINGS" >/dev/null
PYTHONPATH="$BINDINGS:sdk/python" python3 sdk/python/test_spillway.py
node --test sdk/javascript/
