#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is installed (for internal/browsertest)
# and prints its path. Idempotent: does nothing when one is already there.
# Installs Debian's "chromium" package, so it needs root (or sudo) and apt.
set -euo pipefail

find_chromium() {
  if [[ -x /usr/bin/chromium ]]; then
    echo /usr/bin/chromium
    return 0
  fi
  local name
  for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

if ! path="$(find_chromium)"; then
  sudo=()
  if [[ "$(id -u)" -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "ensure-chromium: not root and no sudo; install the chromium package by hand" >&2
      exit 1
    fi
  fi
  echo "ensure-chromium: installing chromium with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Quiet, and without recommends: the browser alone, not a desktop's worth of packages.
  "${sudo[@]}" apt-get update -qq >&2
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
  if ! path="$(find_chromium)"; then
    echo "ensure-chromium: chromium still not found after apt-get install" >&2
    exit 1
  fi
fi

echo "$path"
