#!/usr/bin/env bash
# Replay the Codabench compute worker on a submission: a thin wrapper of
# `challenge-welding dry-run` (Python, Docker SDK; Docker or Podman's API service).
#
#   scripts/dry_run.sh --submission SUB.zip (--bundle bundle.zip | --data DATA --image IMAGE)
#                      [--engine-url unix:///run/podman/podman.sock] [--time-limit S] ...
#
# Every option is `challenge-welding dry-run --help`'s. The command is taken from
# $PYTHON (default: the repository's .venv), else from `challenge-welding` on PATH.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
case "${1:-}" in -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' ;; esac
PY="${PYTHON:-$REPO/.venv/bin/python}"
if [ -x "$PY" ]; then exec "$PY" -m challenge_welding dry-run "$@"; fi
exec challenge-welding dry-run "$@"
