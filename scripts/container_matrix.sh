#!/usr/bin/env bash
# Container matrix: every reference solution, and the organisers' published TensorFlow one,
# installed, ingested and scored inside the evaluation image built from the Dockerfile
# UNCHANGED on python:3.12-slim, in five modes, against the same solutions run on the host;
# and a hostile submission (reads reference_data, writes the output folder) in every mode.
#
#   scripts/container_matrix.sh [--workdir DIR] [--published REPO] [--solutions "A B ..."]
#                               [--modes "M N ..."] [--keep] [--table-only]
#
# Modes (each a `podman run --rm` of `challenge-welding ingest`, then `score`, in the image):
#   root     podman run as root: Podman's default capabilities (CAP_SETUID, no CAP_SYS_ADMIN)
#   nonroot  --user 1000:1000
#   worker7, worker1, worker0   as Codabench's compute worker makes the container (uid 0, the
#            14 capabilities of bundle/worker.CAP_DROP dropped, no-new-privileges, no
#            shm_size), with CHALLENGE_WELDING_LANDLOCK_ABI_MAX=7, 1 (a 5.15 kernel) and 0
# Needs: root, podman, the image's base (docker.io/library/python:3.12-slim: pulled, or a
# local stand-in tagged so), network to PyPI. --published REPO: a checkout of
# confianceai/Challenge-Welding-Reference-Solution-1 (copied as benchmarks/published_solution.py
# does: torch and onnxruntime dropped, never imported); without it that row is left out.
# Layout in the container: /data (input_data + reference_data, read-only), /sub (read-only),
# /out (the output folder: /out/pred, /out/scores; 0755 root's, as the worker makes it; the
# non-root mode's is uid 1000's). Environments are made afresh in every (solution, mode)
# (install included); uv's download cache is kept per uid in WORK/uv-<uid> between runs.
# Declared differences from a Codabench worker: host network and the host's CA bundle
# mounted (this machine reaches PyPI only so), reference_data beside input_data (as a local
# `evaluate` lays it out: the hostile submission has something to aim at).
# --solutions picks and orders the rows (a run in parts: the table of every row so far comes
# with --table-only). Output: WORK/matrix.md (solution x mode: score, same as host, the layers line) and the
# hostile row; exit 1 if a score differs from the host's or the hostile submission got through.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$REPO/.cache/container-matrix" PUBLISHED="" KEEP=0 TABLE_ONLY=0
SOLUTIONS="hostile published Solution-1 Solution-1-no-trust always-ok always-ko full-unknown random cnn-small"
MODES="root nonroot worker7 worker1 worker0"
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) WORK="$2"; shift 2 ;;
    --published) PUBLISHED="$(cd "$2" && pwd)"; shift 2 ;;
    --solutions) SOLUTIONS="$2"; shift 2 ;;
    --modes) MODES="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --table-only) TABLE_ONLY=1; shift ;;
    -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "container_matrix: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$PUBLISHED" ] || SOLUTIONS="${SOLUTIONS/published/}"
PY="${PYTHON:-$REPO/.venv/bin/python}"
CW="$(dirname "$PY")/challenge-welding"
BASE=docker.io/library/python:3.12-slim
IMAGE=localhost/challenge-welding-eval:py312
CA=/etc/ssl/certs/ca-certificates.crt
T0=$SECONDS
step() { echo; echo "=== [$((SECONDS - T0)) s] $*"; }

[ "$(id -u)" = 0 ] || { echo "container_matrix: run as root (rootful podman)" >&2; exit 2; }
command -v podman >/dev/null || { echo "container_matrix: podman is missing (apt-get install podman runc)" >&2; exit 2; }
# Root here may lack CAP_SYS_RESOURCE: podman must not raise the containers' ulimits.
grep -qs '^ *default_ulimits' /etc/containers/containers.conf || {
  echo "container_matrix: /etc/containers/containers.conf needs default_ulimits = [] under [containers] (scripts/container_test.sh writes it)" >&2; exit 2; }
mkdir -p "$WORK"; WORK="$(cd "$WORK" && pwd)"
if [ "$TABLE_ONLY" = 0 ]; then

step "base $BASE and the image $IMAGE (the Dockerfile unchanged: no build argument)"
podman image exists "$BASE" || podman pull "$BASE" || {
  echo "container_matrix: no $BASE here and no registry: make a stand-in tagged $BASE (a Debian base with CPython 3.12 in /usr/local)" >&2; exit 2; }
podman run --rm "$BASE" python3 --version
podman --runtime runc build --network=host -v "$CA:$CA:ro" -t "$IMAGE" "$REPO"

DATA="$WORK/DATA"
if [ ! -d "$DATA/reference_data" ]; then
  step "demo data (synth 600 + build-sets) in $DATA"
  "$CW" synth --out "$WORK/synth" --n 600 --seed 0
  DS="$WORK/synth/challenge-welding/datasets"
  "$CW" build-sets --source "$DS/synthetic" --unseen-source "$DS/synthetic_unseen" \
    --ood-source "$WORK/synth/ood_photos" --out "$DATA" --seed 0
fi

step "the solutions in $WORK/sol"
SOL="$WORK/sol"; mkdir -p "$SOL"
for s in $SOLUTIONS; do
  [ -d "$SOL/$s" ] && continue
  case "$s" in
    Solution-1|Solution-1-no-trust)  # trained by its own train.py on the public split
      rm -rf "$SOL/$s.tmp"; cp -r "$REPO/reference-solutions/Solution-1" "$SOL/$s.tmp"
      flag=(); [ "$s" = Solution-1-no-trust ] && flag=(--no-trust)
      "$PY" "$SOL/$s.tmp/train.py" --data "$DATA/training_data" --out "$SOL/$s.tmp" "${flag[@]}"
      mv "$SOL/$s.tmp" "$SOL/$s" ;;
    published)
      "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); from published_solution import copy_solution; from pathlib import Path; print("dropped:", copy_solution(Path(sys.argv[2]), Path(sys.argv[3])))' \
        "$REPO/benchmarks" "$PUBLISHED" "$SOL/published" ;;
    hostile) ;;
    *) cp -r "$REPO/reference-solutions/$s" "$SOL/$s" ;;
  esac
done
# The hostile submission: always-ok's answers; at load_model and at its first predict it
# lists and reads /data/reference_data and writes, chmods and renames into /out/pred.
rm -rf "$SOL/hostile"; cp -r "$REPO/reference-solutions/always-ok" "$SOL/hostile"
cat > "$SOL/hostile/challenge_solution/attack.py" <<'PYEOF'
import errno
import os
from pathlib import Path

REF, OUT = "/data/reference_data", "/out/pred"


def _try(what, fn):
    try:
        print("HOSTILE", what, "GOT", fn(), flush=True)
    except OSError as e:
        print("HOSTILE", what, "refused", errno.errorcode.get(e.errno, e.errno), flush=True)


def attack(when):
    _try(f"{when} list reference_data", lambda: len(os.listdir(REF)))
    _try(f"{when} read reference_data", lambda: len(Path(REF, "performance.parquet").read_bytes()))
    _try(f"{when} write output", lambda: Path(OUT, "planted_by_submission.txt").write_text("x"))
    _try(f"{when} chmod output", lambda: os.chmod(OUT, 0o777))
    _try(f"{when} rename in output", lambda: os.rename(Path(OUT, "ingestion.log"),
                                                       Path(OUT, "moved.log")))
PYEOF
"$PY" - "$SOL/hostile/challenge_solution/AIComponent.py" <<'PYEOF'
import sys
from pathlib import Path
p = Path(sys.argv[1]); s = p.read_text()
s = s.replace("import numpy as np\n", "import numpy as np\n\nfrom .attack import attack\n")
s = s.replace("    def load_model(self, config_file=None):\n",
              "    def load_model(self, config_file=None):\n        attack('load_model')\n"
              "        self.attacked = False\n")
s = s.replace("        n = len(input_images)\n",
              "        if not self.attacked:\n            self.attacked = True\n"
              "            attack('predict')\n        n = len(input_images)\n")
p.write_text(s)
PYEOF

RUN='challenge-welding ingest --submission /sub --input-data /data/input_data --output /out/pred --no-progress; st=$?; echo "ingest exit $st"; [ $st = 0 ] || exit $st; challenge-welding score --reference /data/reference_data --predictions /out/pred --output /out/scores'
CAPS=($("$PY" -c 'from challenge_welding.bundle.worker import CAP_DROP; print(" ".join(CAP_DROP))'))
mode_args() {  # podman run options of a mode
  case "$1" in
    root) ;;
    nonroot) echo "--user 1000:1000" ;;
    worker*) printf -- '--cap-drop %s ' "${CAPS[@]}"
             echo "--security-opt no-new-privileges -e CHALLENGE_WELDING_LANDLOCK_ABI_MAX=${1#worker}" ;;
  esac
}

step "host runs (root, the repository's venv): ingest + score"
for s in $SOLUTIONS; do
  H="$WORK/host/$s"
  [ "$s" = hostile ] || [ -f "$H/scores/scores.json" ] && continue
  rm -rf "$H"; mkdir -p "$H"
  "$CW" ingest --submission "$SOL/$s" --input-data "$DATA/input_data" --output "$H/pred" \
    --env-cache "$WORK/host-envs" --no-progress > "$H/console.log" 2>&1 || true
  "$CW" score --reference "$DATA/reference_data" --predictions "$H/pred" --output "$H/scores" \
    >> "$H/console.log" 2>&1 || echo "host: $s did not score (see $H/console.log)"
done

mkdir -p "$WORK/uv-0" "$WORK/uv-1000"; chown 1000:1000 "$WORK/uv-1000"
for s in $SOLUTIONS; do
  for m in $MODES; do
    R="$WORK/runs/$s/$m"
    step "$s in $m"
    rm -rf "$R"; mkdir -p "$R/out" "$R/cache"
    chmod 0755 "$R/out"; chmod 1777 "$R/cache"
    uid=0; [ "$m" = nonroot ] && { uid=1000; chown 1000:1000 "$R/out"; }
    s0=$SECONDS
    # shellcheck disable=SC2046
    podman --runtime runc run --rm --network host -v "$CA:$CA:ro" -v "$DATA:/data:ro" \
      -v "$SOL/$s:/sub:ro" -v "$R/out:/out" -v "$R/cache:/var/cache/challenge-welding" \
      -v "$WORK/uv-$uid:/var/cache/challenge-welding/uv" $(mode_args "$m") \
      "$IMAGE" sh -c "$RUN" > "$R/console.log" 2>&1 && echo 0 > "$R/status" || echo $? > "$R/status"
    echo "$((SECONDS - s0))" > "$R/seconds"
    grep -m1 "^sandbox layers:\|^error:" "$R/console.log" || true
    tail -n 1 "$R/console.log"
    [ "$KEEP" = 1 ] || rm -rf "$R/cache"
  done
done

fi  # TABLE_ONLY

step "table"
"$PY" - "$WORK" "$SOLUTIONS" "$MODES" <<'PYEOF'
import json, re, sys
from pathlib import Path
from challenge_welding.bundle.compare import compare_files
work, modes = Path(sys.argv[1]), sys.argv[3].split()
sols = [s for s in sys.argv[2].split() if s != "hostile"]
bad, rows, layers = [], [], {}
head = "| solution | host | " + " | ".join(modes) + " |"
rows += [head, "|" + "---|" * (len(modes) + 2)]
for s in sols:
    host = work / "host" / s / "scores" / "scores.json"
    hs = json.loads(host.read_text())["score"] if host.is_file() else None
    cells = [s, f"{hs:.2f}" if hs is not None else "failed"]
    for m in modes:
        r = work / "runs" / s / m
        got = r / "out" / "scores" / "scores.json"
        if not (r / "seconds").is_file():
            cells.append("not run")
            continue
        if got.is_file() and host.is_file():
            diffs = compare_files(got, host)
            cells.append(f"{json.loads(got.read_text())['score']:.2f} "
                         + ("same" if not diffs else "DIFFERS: " + "; ".join(diffs)))
            bad += [f"{s}/{m}: {d}" for d in diffs]
        elif "error: no layer confines" in (r / "console.log").read_text(errors="replace"):
            cells.append("refused to start (one line)")  # nothing confines: the expected end
        else:
            cells.append(f"failed ({(r / 'status').read_text().strip()})")
            bad.append(f"{s}/{m}: no scores.json")
        cells[-1] += f", {(r / 'seconds').read_text().strip()} s"
        text = (r / "console.log").read_text(errors="replace")
        line = re.search(r"^(sandbox layers: .*|error: .*)$", text, re.M)
        layers.setdefault(m, line.group(1) if line else "?")
    rows.append("| " + " | ".join(cells) + " |")
hostile = ["", "| hostile | " + " | ".join(modes) + " |", "|" + "---|" * (len(modes) + 1)]
cells = ["reference_data / output folder"]
for m in modes:
    r = work / "runs" / "hostile" / m
    if not (r / "console.log").is_file():
        cells.append("not run")
        continue
    text = (r / "console.log").read_text(errors="replace")
    log = r / "out" / "pred" / "submission_output.log"
    said = log.read_text(errors="replace") if log.is_file() else ""
    got = re.findall(r"HOSTILE (\S+ [^\n]*?) GOT", said)
    # chmod is no Landlock right: a folder's mode changed by its owner (uid 0) writes nothing
    chmods = [g for g in got if "chmod" in g]
    got = [g for g in got if "chmod" not in g]
    refused = sorted(set(re.findall(r"HOSTILE \S+ (.*? refused \S+)", said)))
    planted = (r / "out" / "pred" / "planted_by_submission.txt").exists()
    start = re.search(r"^error: (.*)$", text, re.M)
    if got or planted:
        cells.append("GOT THROUGH: " + "; ".join(got)); bad.append(f"hostile/{m}: {got}")
    elif not said and start:
        cells.append("refused to start: " + start.group(1)[:160])
    else:
        cells.append("held: " + "; ".join(refused)
                     + ("; but the mode changed: " + ", ".join(chmods) if chmods else ""))
    layers[m] = layers.get(m, "?")
hostile.append("| " + " | ".join(cells) + " |")
out = "\n".join(rows + hostile + ["", "layers line per mode:"]
                + [f"- {m}: `{layers[m]}`" for m in modes]) + "\n"
(work / "matrix.md").write_text(out)
print(out)
for b in bad:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PYEOF
echo "container matrix: done in $((SECONDS - T0)) s ($WORK/matrix.md)"
