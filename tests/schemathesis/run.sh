#!/usr/bin/env bash
# Fuzzes the REST API with schemathesis (PyPI) against a live host and fails
# on any 5xx answer.
#
# The host is started by the Rust test `schemathesis_finds_no_server_error`
# in host/tests/rest_api.rs: a herder with the built plugins on the embedded
# broker, served on 127.0.0.1:<free port>. The test runs
#   schemathesis run http://127.0.0.1:<port>/openapi.json --checks not_a_server_error
#     --max-examples $SPILLWAY_SCHEMATHESIS_EXAMPLES --phases examples,coverage,fuzzing ...
# and is bounded to 10 minutes. Without schemathesis installed the test skips
# with a note; this script installs it first so that it runs for real.
#
#   tests/schemathesis/run.sh              # 30 examples per operation
#   SPILLWAY_SCHEMATHESIS_EXAMPLES=100 tests/schemathesis/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! python3 -c 'import schemathesis' 2>/dev/null; then
  python3 -m pip install -q 'schemathesis>=4,<5'
fi
# The console script may live outside PATH (pip --user); use the one next to
# this python's scripts directory when it is not on PATH.
if command -v schemathesis >/dev/null; then
  export SPILLWAY_SCHEMATHESIS="${SPILLWAY_SCHEMATHESIS:-schemathesis}"
else
  scripts=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
  export SPILLWAY_SCHEMATHESIS="${SPILLWAY_SCHEMATHESIS:-$scripts/schemathesis}"
fi

[ -f target/plugins/noop-sink.wasm ] || scripts/build-plugins.sh
cargo test --release -p spillway --test rest_api schemathesis_finds_no_server_error -- --nocapture
