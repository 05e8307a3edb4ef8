#!/usr/bin/env bash
# Debian packages the host itself builds with, installed where missing:
# librdkafka's TLS and SASL SCRAM link the system's OpenSSL (rdkafka's `ssl`
# feature), found through pkg-config.
set -euo pipefail
if ! pkg-config --exists openssl 2>/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libssl-dev pkg-config >/dev/null
fi
