#!/usr/bin/env bash
# Installs every Debian package weft builds and tests with. Idempotent; run as root (or with sudo).
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS=(
  build-essential cmake ninja-build pkg-config clang clang-format libclang-rt-14-dev
  libgtest-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libcpp-httplib-dev libfmt-dev
  libgloo-dev libnuma-dev libssl-dev
  python3
)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
