#!/usr/bin/env bash
# Container test: `challenge-welding dry-run` through Podman's Docker-compatible API, end to
# end, with the evaluation image built from the Dockerfile unchanged (on python:3.12-slim).
#
#   scripts/container_test.sh [--workdir DIR] [--data DATA --solution DIR] [--keep] [--skip-fullhd]
#                             [--quickstart-only] [--debian-base]
#
# 1. podman, debootstrap, runc: installed with apt when missing (root);
#    /etc/containers/containers.conf gets cgroup_manager = "cgroupfs" and
#    default_ulimits = [] when it has no such settings (containers inside a VM/container).
# 2. base image: the Dockerfile's own, python:3.12-slim (present in podman's store, or pulled;
#    a machine without a registry tags a stand-in so); --debian-base: localhost/cw-base:bookworm
#    instead, `debootstrap --variant=minbase` with Debian's python3 (3.11), python3-venv,
#    python3-pip, ca-certificates, imported with `podman import` (cached).
# 3. the Dockerfile built twice, unchanged: the default (root, as Codabench needs) and the
#    non-root variant (--build-arg APP_USER=welder).
# 4. Podman's API service on unix:///run/podman/podman.sock (started here when absent,
#    stopped at the end); every dry run talks to it through the Docker SDK.
# 5. demo data (synth + build-sets, small) and Solution-1 trained by its own train.py on
#    the public split, unless --data and --solution are given; the bundle.
# 6. checks, each a dry run of the bundle as Codabench's default queue runs it:
#    a. Solution-1 scores, and its scores.json equals the host run's (time keys aside);
#    b. a submission with metadata.yaml whose second container plants valid predictions
#       is refused (the scorer reads the worker's `metadata`: ingestionExitCode != 0);
#    c. the non-root image fails as on Codabench (cannot write the worker's 0755 /app/output);
#    d. a submission pinning opencv-python (not headless) imports cv2 and scores;
#    e. full-HD performance images under the worker's 64 MB /dev/shm (--skip-fullhd: not run);
#    f. the README's participant quick start: its `docker` lines as written, with Podman
#       (build, check-submission of a read-only submission, synthetic data, evaluate).
# Network: Debian and PyPI for the builds and the submissions' environments (host network;
# the host's CA bundle is mounted so that a TLS-intercepting proxy works).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$REPO/.cache/container-test" DATA="" SOLUTION="" KEEP=0 FULLHD=1 QUICKSTART_ONLY=0 DEBIAN_BASE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) WORK="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    --solution) SOLUTION="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --skip-fullhd) FULLHD=0; shift ;;
    --quickstart-only) QUICKSTART_ONLY=1; shift ;;
    --debian-base) DEBIAN_BASE=1; shift ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "container_test: unknown option $1" >&2; exit 2 ;;
  esac
done
PY="${PYTHON:-$REPO/.venv/bin/python}"
CW="$(dirname "$PY")/challenge-welding"
BASE=docker.io/library/python:3.12-slim
[ "$DEBIAN_BASE" = 0 ] || BASE=localhost/cw-base:bookworm
IMAGE=localhost/challenge-welding-eval:container-test
IMAGE_NONROOT=localhost/challenge-welding-eval:container-test-nonroot
ROOTFS_CACHE=/var/cache/challenge-welding/bookworm-rootfs
CA=/etc/ssl/certs/ca-certificates.crt
SOCK=/run/podman/podman.sock
URL="unix://$SOCK"
T0=$SECONDS
FAILED=()
step() { echo; echo "=== [$((SECONDS - T0)) s] $*"; }
check() { if [ "$1" = ok ]; then echo "PASS: $2"; else echo "FAIL: $2" >&2; FAILED+=("$2"); fi; }

step "podman"
[ "$(id -u)" = 0 ] || { echo "container_test: run as root (podman's rootful API service)" >&2; exit 2; }
if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null || ! command -v runc >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman debootstrap runc >/dev/null
fi
CONF=/etc/containers/containers.conf
mkdir -p /etc/containers
if ! grep -q '^ *cgroup_manager' "$CONF" 2>/dev/null; then
  # No systemd inside this machine: cgroupfs; and no ulimit defaults it may not raise.
  printf '[containers]\ndefault_ulimits = []\n\n[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\n' >> "$CONF"
  echo "wrote $CONF"
fi
podman --version
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"

if [ "$QUICKSTART_ONLY" = 0 ]; then
step "base image $BASE"
if [ "$DEBIAN_BASE" = 0 ]; then
  podman image exists "$BASE" || podman pull "$BASE" || {
    echo "container_test: no $BASE here and no registry: tag a stand-in so (Debian + CPython 3.12 in /usr/local), or pass --debian-base" >&2; exit 2; }
elif ! podman image exists "$BASE"; then
  if [ ! -x "$ROOTFS_CACHE/usr/bin/python3" ]; then
    rm -rf "$ROOTFS_CACHE.tmp" && mkdir -p "$(dirname "$ROOTFS_CACHE")"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
      bookworm "$ROOTFS_CACHE.tmp" http://deb.debian.org/debian
    mv "$ROOTFS_CACHE.tmp" "$ROOTFS_CACHE"
  fi
  tar -C "$ROOTFS_CACHE" -c . | podman import - "$BASE"
fi

step "build $IMAGE (root, the default) and $IMAGE_NONROOT (APP_USER=welder)"
BUILD=(podman --runtime runc build --network=host -v "$CA:$CA:ro")
[ "$DEBIAN_BASE" = 0 ] || BUILD+=(--build-arg BASE_IMAGE="$BASE")
"${BUILD[@]}" -t "$IMAGE" "$REPO"
"${BUILD[@]}" --build-arg APP_USER=welder -t "$IMAGE_NONROOT" "$REPO"

step "Podman's Docker-compatible API on $URL"
SERVICE_PID=""
if [ ! -S "$SOCK" ] || ! podman --url "$URL" version >/dev/null 2>&1; then
  mkdir -p "$(dirname "$SOCK")"
  podman --runtime runc system service --time=0 "$URL" > "${TMPDIR:-/tmp}/podman-service.log" 2>&1 &
  SERVICE_PID=$!
  for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.2; done
fi
cleanup() { [ -z "$SERVICE_PID" ] || kill "$SERVICE_PID" 2>/dev/null || true; }
trap cleanup EXIT

if [ -z "$DATA" ]; then
  step "demo data (synth + build-sets) in $WORK"
  [ -d "$WORK/synth" ] || "$CW" synth --out "$WORK/synth" --n 600 --seed 0
  # the organisers' route: the published layout, unseen seams and OOD photos as separate inputs
  DS="$WORK/synth/challenge-welding/datasets"
  [ -d "$WORK/DATA/reference_data" ] || "$CW" build-sets --source "$DS/synthetic" \
      --unseen-source "$DS/synthetic_unseen" --ood-source "$WORK/synth/ood_photos" --out "$WORK/DATA" --seed 0
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

# Declared differences from a Codabench worker: host network and the host's CA bundle
# (this machine reaches PyPI only so), and a shared environment cache between runs.
DRY=("$CW" dry-run --bundle "$WORK/bundle.zip" --engine-url "$URL" --network-mode host
     --mount "$CA:$CA:ro")
KEEP_ARG=(); [ "$KEEP" = 1 ] && KEEP_ARG=(--keep)

step "a. Solution-1 through the bundle in $IMAGE (the default queue's limit)"
rc=0; "${DRY[@]}" "${KEEP_ARG[@]}" --image "$IMAGE" --submission "$SOLUTION" --out "$WORK/dry-solution-1" || rc=$?
if [ $rc = 0 ] && "$PY" -m challenge_welding.bundle.compare "$WORK/dry-solution-1/scores/scores.json" "$WORK/host/out/scores.json"; then
  check ok "a. Solution-1 scores in the container as on the host"
else check fail "a. Solution-1 scores in the container as on the host (dry-run status $rc)"; fi

step "b. a submission with metadata.yaml: its own container plants the host run's predictions"
PLANT="$WORK/planted"
rm -rf "$PLANT" && cp -r "$SOLUTION" "$PLANT" && mkdir -p "$PLANT/forged"
cp "$WORK/host/pred/"*.parquet "$WORK/host/pred/ingestion.json" "$PLANT/forged/"
# Beside the ingestion (which refuses such a submission), wait for it to end, then put
# valid-looking predictions and a consistent ingestion.json into the shared /app/output.
printf '%s\n' "command: sh -c 'sleep 25; cp -r /app/program/forged/. /app/output/'" > "$PLANT/metadata.yaml"
rc=0; "${DRY[@]}" --image "$IMAGE" --submission "$PLANT" --out "$WORK/dry-planted" || rc=$?
grep -h "ingestionExitCode" "$WORK/dry-planted/predictions/metadata" || true
if [ $rc = 1 ] && [ ! -f "$WORK/dry-planted/scores/scores.json" ]; then
  check ok "b. planted metadata.yaml submission refused (scoring: $(tail -n 1 "$WORK/dry-planted/logs/scoring.log" 2>/dev/null))"
else check fail "b. planted metadata.yaml submission refused (dry-run status $rc)"; fi

step "c. the non-root image under the worker's folder modes"
rc=0; "${DRY[@]}" --image "$IMAGE_NONROOT" --submission "$SOLUTION" --out "$WORK/dry-nonroot" || rc=$?
if [ $rc = 1 ] && grep -q "Permission denied" "$WORK/dry-nonroot/logs/ingestion.log"; then
  check ok "c. non-root image fails as on Codabench: $(grep -m1 'Permission denied' "$WORK/dry-nonroot/logs/ingestion.log")"
else check fail "c. non-root image fails as on Codabench (dry-run status $rc)"; fi

step "d. a submission pinning opencv-python (not headless)"
CV="$WORK/opencv-python"
rm -rf "$CV" && "$PY" - "$CV" <<'PYEOF'
import sys, textwrap
from pathlib import Path
out = Path(sys.argv[1]); pkg = out / "challenge_solution"; pkg.mkdir(parents=True)
(out / "setup.py").write_text(textwrap.dedent("""\
    from setuptools import setup, find_packages
    setup(name="cv-solution", version="0.1", packages=find_packages(),
          install_requires=open("requirements.txt").read().split())
    """))
(out / "requirements.txt").write_text("opencv-python\nnumpy\n")
(pkg / "__init__.py").write_text("")
(pkg / "AIComponent.py").write_text(textwrap.dedent("""\
    import cv2  # opencv-python: needs libGL.so.1 and glib from the image
    from challenge_welding.AIComponent_interface import AbstractAIComponent

    class MyAIComponent(AbstractAIComponent):
        def load_model(self, config_file=None):
            print("cv2", cv2.__version__, "from", cv2.__file__)

        def predict(self, input_images, images_meta_informations, device="cpu"):
            answers = ["OK" if cv2.mean(img)[0] > 0 else "UNKNOWN" for img in input_images]
            return {"predictions": answers}
    """))
PYEOF
rc=0; "${DRY[@]}" --image "$IMAGE" --submission "$CV" --out "$WORK/dry-opencv" || rc=$?
# load_model prints where cv2 came from: the submission's own environment (opencv-python).
CV2_LINE="$(grep -rhs -m1 '^cv2 .* from .*/site-packages/cv2/' "$WORK/dry-opencv/predictions" || true)"
if [ $rc = 0 ] && [ -n "$CV2_LINE" ]; then
  check ok "d. opencv-python submission imports cv2 and scores ($CV2_LINE)"
else check fail "d. opencv-python submission imports cv2 and scores (dry-run status $rc)"; fi

if [ "$FULLHD" = 1 ]; then
  # Real photos are 1920x1080; the worker sets no shm_size (64 MB /dev/shm).
  step "e. full-HD performance images under the worker's 64 MB /dev/shm"
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
  rc=0; "$CW" dry-run --data "$WORK/DATA-hd" --repo "$REPO" --image "$IMAGE" --engine-url "$URL" \
    --network-mode host --mount "$CA:$CA:ro" --submission "$SOLUTION" --out "$WORK/dry-hd" \
    > "$WORK/dry-hd.log" 2>&1 || rc=$?
  if [ $rc = 0 ] && grep -q '"status": "ok"' "$WORK/dry-hd/predictions/ingestion.json"; then
    check ok "e. full-HD images under a 64 MB /dev/shm"
  else check fail "e. full-HD images under a 64 MB /dev/shm (status $rc; 135 = SIGBUS; see $WORK/dry-hd.log)"; fi
fi

fi  # QUICKSTART_ONLY

# The participant quick start: the README's `docker` lines, run as written (in a folder laid out
# as the repository, with the `random` reference solution), `docker` being Podman here. Declared
# differences, added to `run` only: host network and the host's CA bundle (as above). `docker
# build` resolves the Dockerfile's default base, python:3.12-slim (pulled, or a local stand-in
# tagged with that name); --quickstart-only runs this step alone.
step "f. the README's docker lines (participant quick start) with Podman"
QS="$WORK/quickstart"
rm -rf "$QS" && mkdir -p "$QS/reference-solutions"
cp -r "$REPO/reference-solutions/random" "$QS/reference-solutions/random"
cp -r "$REPO/challenge-welding" "$QS/challenge-welding"
cp "$REPO/Dockerfile" "$QS/"; [ ! -f "$REPO/.dockerignore" ] || cp "$REPO/.dockerignore" "$QS/"
# the quick start section's fenced bash lines that start with `docker` or `mkdir`
awk '/^## /{q=($0 == "## Participant quick start")} q && /^```bash$/{f=1; next} /^```$/{f=0} q && f && /^(docker|mkdir) /' \
  "$REPO/README.md" > "$QS/quickstart.sh"
cat "$QS/quickstart.sh"
rc=0
( cd "$QS"
  docker() {
    case "$1" in
      build) shift; podman --runtime runc build --network=host -v "$CA:$CA:ro" "$@" ;;
      run) shift; podman --runtime runc run --network=host -v "$CA:$CA:ro" "$@" ;;
      *) podman "$@" ;;
    esac
  }
  set -e
  # shellcheck disable=SC1091
  . ./quickstart.sh
) > "$WORK/quickstart.log" 2>&1 || rc=$?
tail -n 5 "$WORK/quickstart.log"
if [ $rc = 0 ] && [ "$(grep -c '^docker ' "$QS/quickstart.sh")" = 4 ] \
   && grep -q "ready to upload" "$WORK/quickstart.log" && [ -f "$QS/work/OUT/scores.json" ]; then
  check ok "f. the README's docker lines: check-submission ready to upload, evaluate wrote scores.json ($(head -c 120 "$QS/work/OUT/scores.json"))"
else check fail "f. the README's docker lines (status $rc; see $WORK/quickstart.log)"; fi

echo
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "container test FAILED in $((SECONDS - T0)) s: ${FAILED[*]}" >&2
  exit 1
fi
echo "container test passed in $((SECONDS - T0)) s"
