#!/usr/bin/env bash
# Debian's headless Chromium renders the detailed results page in a test.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "chromium is missing: install Debian's 'chromium' package (the page test is skipped without it)" >&2
  exit 0
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
