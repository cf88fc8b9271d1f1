#!/usr/bin/env bash
# Installs every Debian package weft builds and tests with. Idempotent; run as root (or with sudo).
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS=(
  build-essential cmake ninja-build pkg-config clang clang-format libclang-rt-14-dev
  libgtest-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libcpp-httplib-dev prometheus-cpp-dev libfmt-dev
  libgloo-dev libnuma-dev libssl-dev
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers  # vk: devices; CI's is lavapipe
  python3
)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# The end-to-end tests (scripts/e2e.sh): node >= 20 with npm, Chromium, curl. Each only when its
# command is missing: a nodesource node bundles npm, and Debian's npm package conflicts with it.
for tool in node:nodejs npm:npm chromium:chromium curl:curl; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
