#!/usr/bin/env bash
# Container test: build the evaluation image on a base made here (no registry needed), then
# dry-run Solution-1 through the Codabench bundle in it, and check that its scores.json
# equals the host run's, time-dependent keys aside (score, perf, time_p95: see
# challenge_welding/bundle/compare.py).
#
#   scripts/container_test.sh [--workdir DIR] [--data DATA --solution DIR] [--keep] [--skip-fullhd]
#
# 1. podman (+ debootstrap): installed with apt when missing and run as root;
#    /etc/containers/containers.conf gets cgroup_manager = "cgroupfs" and
#    default_ulimits = [] when it has no such settings (containers inside a VM/container).
# 2. base image localhost/cw-base:bookworm: `debootstrap --variant=minbase` with python3,
#    python3-venv, python3-pip, ca-certificates, imported with `podman import` (cached).
#    Bookworm's Python is 3.11, the image's default (python:3.12-slim) is not reachable here.
# 3. `podman build --build-arg BASE_IMAGE=localhost/cw-base:bookworm` of the Dockerfile.
# 4. demo data: `synth` + `build-sets` (small), Solution-1 trained by its own command,
#    unless --data and --solution are given.
# 5. host run (ingest + score with this repository's venv), bundle, dry run, comparison.
# 6. the same data with full-HD performance images under the worker's default /dev/shm
#    (64 MB): the run must complete (--skip-fullhd to leave it out).
# Network: PyPI for the build and for the submission's environment (the host's CA bundle
# is mounted so that a TLS-intercepting proxy works).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$REPO/.cache/container-test" DATA="" SOLUTION="" KEEP=0 FULLHD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) WORK="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    --solution) SOLUTION="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --skip-fullhd) FULLHD=0; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "container_test: unknown option $1" >&2; exit 2 ;;
  esac
done
PY="${PYTHON:-$REPO/.venv/bin/python}"
CW="$(dirname "$PY")/challenge-welding"
BASE=localhost/cw-base:bookworm
IMAGE=localhost/challenge-welding-eval:container-test
ROOTFS_CACHE=/var/cache/challenge-welding/bookworm-rootfs
CA=/etc/ssl/certs/ca-certificates.crt
T0=$SECONDS
step() { echo; echo "=== [$((SECONDS - T0)) s] $*"; }

step "podman"
if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "podman and debootstrap are missing; run as root to install them" >&2; exit 2; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman debootstrap runc >/dev/null
fi
if [ "$(id -u)" = 0 ]; then
  CONF=/etc/containers/containers.conf
  mkdir -p /etc/containers
  if ! grep -q '^ *cgroup_manager' "$CONF" 2>/dev/null; then
    # No systemd inside this machine: cgroupfs; and no ulimit defaults it may not raise.
    printf '[containers]\ndefault_ulimits = []\n\n[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n' >> "$CONF"
    echo "wrote $CONF"
  fi
fi
podman --version

step "base image $BASE"
if ! podman image exists "$BASE"; then
  if [ ! -x "$ROOTFS_CACHE/usr/bin/python3" ]; then
    rm -rf "$ROOTFS_CACHE.tmp" && mkdir -p "$(dirname "$ROOTFS_CACHE")"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
      bookworm "$ROOTFS_CACHE.tmp" http://deb.debian.org/debian
    mv "$ROOTFS_CACHE.tmp" "$ROOTFS_CACHE"
  fi
  tar -C "$ROOTFS_CACHE" -c . | podman import - "$BASE"
fi

step "build $IMAGE"
podman --runtime runc build --network=host -v "$CA:$CA:ro" --build-arg BASE_IMAGE="$BASE" \
  -t "$IMAGE" "$REPO"

mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
if [ -z "$DATA" ]; then
  step "demo data (synth + build-sets) in $WORK"
  [ -d "$WORK/synth" ] || "$CW" synth --out "$WORK/synth" --n 600 --seed 0
  [ -d "$WORK/DATA/reference_data" ] || "$CW" build-sets --source "$WORK/synth" --out "$WORK/DATA" --seed 0
  DATA="$WORK/DATA"
fi
if [ -z "$SOLUTION" ]; then
  step "Solution-1 trained on $DATA/training_data"
  SOLUTION="$WORK/Solution-1"
  if [ ! -d "$SOLUTION" ]; then
    cp -r "$REPO/reference-solutions/Solution-1" "$SOLUTION.tmp"
    # Solution-1's own training command (see its train.py), on the public training split.
    "$PY" "$SOLUTION.tmp/train.py" --data "$DATA/training_data" --out "$SOLUTION.tmp"
    mv "$SOLUTION.tmp" "$SOLUTION"
  fi
fi

step "host run: ingest + score"
rm -rf "$WORK/host"
"$CW" ingest --submission "$SOLUTION" --input-data "$DATA/input_data" --output "$WORK/host/pred"
"$CW" score --reference "$DATA/reference_data" --predictions "$WORK/host/pred" --output "$WORK/host/out"

step "bundle"
"$CW" bundle --data "$DATA" --output "$WORK/bundle.zip" --solution "$SOLUTION"

step "dry run in $IMAGE"
(cd "$WORK" && rm -rf bundle-unzipped && "$PY" -c \
  'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' bundle.zip bundle-unzipped)
EXTRA_RUN_ARGS="--network=host -v $CA:$CA:ro" "$REPO/scripts/dry_run.sh" --engine podman \
  --image "$IMAGE" --bundle "$WORK/bundle.zip" \
  --submission "$WORK/bundle-unzipped/solutions/solution-1.zip" \
  --out "$WORK/dry-run" --uv-cache "$WORK/uv-cache"

step "compare scores.json: container vs host"
"$PY" -m challenge_welding.bundle.compare "$WORK/dry-run/scores/scores.json" "$WORK/host/out/scores.json"

if [ "$FULLHD" = 1 ]; then
  # Real photos are 1920x1080; Codabench gives the container the engine's default /dev/shm
  # (64 MB, the worker sets no shm_size). The same data with the performance images
  # scaled to full HD must still run to the end.
  step "full-HD images under the worker's default /dev/shm"
  rm -rf "$WORK/DATA-hd" && cp -r "$DATA" "$WORK/DATA-hd"
  "$PY" - "$WORK/DATA-hd/input_data/performance" <<'PYEOF'
import sys
from pathlib import Path
import cv2
import pandas as pd
root = Path(sys.argv[1])
meta = pd.read_parquet(root / "metadata.parquet")
for rel in meta["path"]:
    img = cv2.imread(str(root / rel))
    cv2.imwrite(str(root / rel), cv2.resize(img, (1920, 1080), interpolation=cv2.INTER_CUBIC))
meta["resolution"] = [[1920, 1080]] * len(meta)
meta.to_parquet(root / "metadata.parquet")
print(f"{len(meta)} performance images scaled to 1920x1080")
PYEOF
  HD=0
  EXTRA_RUN_ARGS="--network=host -v $CA:$CA:ro" "$REPO/scripts/dry_run.sh" --engine podman \
    --image "$IMAGE" --data "$WORK/DATA-hd" \
    --submission "$WORK/bundle-unzipped/solutions/solution-1.zip" \
    --out "$WORK/dry-run-hd" --uv-cache "$WORK/uv-cache" > "$WORK/dry-run-hd.log" 2>&1 || HD=$?
  grep -E '^== (ingestion|scoring): exit' "$WORK/dry-run-hd.log" || true
  if [ $HD -ne 0 ] || ! grep -q '"status": "ok"' "$WORK/dry-run-hd/predictions/ingestion.json" 2>/dev/null; then
    echo "FAILED: full-HD run under the default /dev/shm (see $WORK/dry-run-hd.log;" \
         "exit status 135 = SIGBUS: shared memory larger than /dev/shm)" >&2
    exit 1
  fi
fi
[ "$KEEP" = 1 ] || rm -rf "$WORK/bundle-unzipped" "$WORK/dry-run/run"
echo "container test passed in $((SECONDS - T0)) s"
