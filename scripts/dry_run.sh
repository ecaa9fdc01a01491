#!/usr/bin/env bash
# Play the Codabench compute worker on this machine, with podman or docker.
#
#   scripts/dry_run.sh --image IMAGE --submission SUB.zip|DIR (--bundle bundle.zip | --data DATA)
#                      [--out DIR] [--engine podman|docker] [--uv-cache DIR] [--time-limit S]
#
# Like the worker (codabench compute_worker.py): the prediction step runs the ingestion
# program's metadata.yaml command in a container with /app/program (ingestion program),
# /app/ingested_program (the unzipped submission), /app/input_data and /app/output
# mounted; then the scoring step runs the scoring program's command with /app/program
# (scoring program), /app/input/ref (reference data), /app/input/res (the prediction
# step's output), /app/shared and /app/output. Working directory /app/program,
# PYTHONUNBUFFERED=1, the worker's dropped capabilities and no-new-privileges. An
# ingestion failure does not stop scoring (as on Codabench); the exit status is the
# scoring program's. scores.json is printed at the end.
#
# --bundle: programs and data are taken from the bundle's own zips, exactly what
# Codabench unpacks. --data: a build-sets folder with this repository's program folders
# (they then run the package installed in the image).
# Differences from the worker, on purpose: input and reference data are mounted
# read-only, and the output folders are made writable for any user, because a locally
# built image runs as a non-root user (see the Dockerfile about Codabench).
# EXTRA_RUN_ARGS (environment): more options for `run`, e.g. "--network=host" or a CA mount.
set -euo pipefail

usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
die() { echo "dry_run: error: $*" >&2; exit 2; }

IMAGE="" SUBMISSION="" BUNDLE="" DATA="" OUT="dry-run" ENGINE="${CONTAINER_ENGINE:-}" UV_CACHE=""
TIME_LIMIT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --image) IMAGE="$2"; shift 2 ;;
    --submission) SUBMISSION="$2"; shift 2 ;;
    --bundle) BUNDLE="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --engine) ENGINE="$2"; shift 2 ;;
    --uv-cache) UV_CACHE="$2"; shift 2 ;;
    --time-limit) TIME_LIMIT="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[ -n "$IMAGE" ] || die "--image is required"
[ -n "$SUBMISSION" ] || die "--submission is required"
[ -e "$SUBMISSION" ] || die "$SUBMISSION: no such file or folder"
{ [ -n "$BUNDLE" ] || [ -n "$DATA" ]; } || die "give --bundle bundle.zip or --data DATA"
if [ -z "$ENGINE" ]; then
  if command -v podman >/dev/null; then ENGINE=podman
  elif command -v docker >/dev/null; then ENGINE=docker
  else die "neither podman nor docker is installed"; fi
fi
command -v unzip >/dev/null || command -v python3 >/dev/null || die "unzip or python3 is needed"

REPO="$(cd "$(dirname "$0")/.." && pwd)"
unzip_to() {  # unzip_to ZIP DIR (unzip, or Python's zipfile where unzip is missing)
  mkdir -p "$2"
  if command -v unzip >/dev/null; then unzip -q -o "$1" -d "$2"
  else python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"; fi
}

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/run"
RUN="$OUT/run"
mkdir -p "$RUN"/{ingestion_program,scoring_program,ingested_program,input_data,input/ref,input/res,shared,prediction_output,scoring_output}

if [ -n "$BUNDLE" ]; then
  [ -f "$BUNDLE" ] || die "$BUNDLE: no such file"
  unzip_to "$BUNDLE" "$RUN/bundle"
  task_file() {  # the file competition.yaml gives for a field of the first task
    sed -n "s/^ *$1: *//p" "$RUN/bundle/competition.yaml" | head -1 | tr -d "\"'"
  }
  for field in ingestion_program scoring_program input_data; do
    unzip_to "$RUN/bundle/$(task_file "$field")" "$RUN/$field"
  done
  unzip_to "$RUN/bundle/$(task_file reference_data)" "$RUN/input/ref"
  # The worker stops a run at the phase's execution_time_limit (the first phase's here).
  [ -n "$TIME_LIMIT" ] || TIME_LIMIT="$(sed -n 's/^ *execution_time_limit: *//p' "$RUN/bundle/competition.yaml" | head -1)"
else
  [ -d "$DATA/input_data" ] && [ -d "$DATA/reference_data" ] || die "$DATA: not a build-sets folder"
  cp -r "$REPO/ingestion_program/." "$RUN/ingestion_program/"
  cp -r "$REPO/scoring_program/." "$RUN/scoring_program/"
  cp -r "$DATA/input_data/." "$RUN/input_data/"
  cp -r "$DATA/reference_data/." "$RUN/input/ref/"
fi
if [ -d "$SUBMISSION" ]; then cp -r "$SUBMISSION/." "$RUN/ingested_program/"
else unzip_to "$SUBMISSION" "$RUN/ingested_program"; fi
# A submission without metadata.yaml is not run as a program: the worker copies its files
# into the prediction output (compute_worker.py), where the ingestion then writes too.
if [ ! -e "$RUN/ingested_program/metadata.yaml" ] && [ ! -e "$RUN/ingested_program/metadata" ]; then
  cp -r "$RUN/ingested_program/." "$RUN/prediction_output/"
else
  echo "dry_run: warning: the submission has a metadata file; Codabench would run its command" \
       "as a second program next to the ingestion (not played here)" >&2
fi
# Writable for the image's user, whoever it is (see the header).
chmod 0777 "$RUN/prediction_output" "$RUN/scoring_output" "$RUN/shared" "$RUN/input"

command_of() {  # the `command:` line of a program's metadata.yaml
  local meta="$1/metadata.yaml"
  [ -f "$meta" ] || meta="$1/metadata"
  [ -f "$meta" ] || die "$1: no metadata.yaml"
  local cmd
  cmd="$(sed -n 's/^command: *//p' "$meta" | head -1)"
  [ -n "$cmd" ] || die "$meta: no command"
  echo "$cmd"
}

# The worker's container options (compute_worker.py: cap_drop, security_opt, working_dir, env).
CAPS=(AUDIT_WRITE CHOWN DAC_OVERRIDE FOWNER FSETID KILL MKNOD NET_BIND_SERVICE NET_RAW SETFCAP
      SETGID SETPCAP SETUID SYS_CHROOT)
COMMON=(--rm --workdir /app/program --env PYTHONUNBUFFERED=1 --security-opt no-new-privileges)
for cap in "${CAPS[@]}"; do COMMON+=(--cap-drop "$cap"); done
if [ -n "$UV_CACHE" ]; then
  mkdir -p "$UV_CACHE" && chmod 0777 "$UV_CACHE"
  COMMON+=(--volume "$(cd "$UV_CACHE" && pwd):/var/cache/challenge-welding")
fi
read -r -a EXTRA <<< "${EXTRA_RUN_ARGS:-}"
LIMIT=()
[ -n "$TIME_LIMIT" ] && LIMIT=(timeout --signal=KILL "$TIME_LIMIT")

run_step() {  # run_step NAME PROGRAM_DIR MOUNTS...
  local name="$1" program="$2"; shift 2
  local cmd; cmd="$(command_of "$program")"
  local argv; eval "argv=($cmd)"   # split like the worker's shlex.split of the command
  echo "== $name: $cmd"
  local t0=$SECONDS status=0
  local cname="cw-dry-run-$$-$name"
  "${LIMIT[@]}" "$ENGINE" run --name "$cname" "${COMMON[@]}" "${EXTRA[@]}" \
      --volume "$program:/app/program" "$@" "$IMAGE" "${argv[@]}" \
      > >(tee "$OUT/$name.stdout.log") 2> >(tee "$OUT/$name.stderr.log" >&2) || status=$?
  if [ $status -eq 137 ] && [ -n "$TIME_LIMIT" ]; then
    echo "== $name: stopped at the time limit ($TIME_LIMIT s), as the worker would"
    "$ENGINE" kill "$cname" >/dev/null 2>&1 || true
    "$ENGINE" rm -f "$cname" >/dev/null 2>&1 || true
  fi
  echo "== $name: exit status $status after $((SECONDS - t0)) s"
  return $status
}

ING=0
run_step ingestion "$RUN/ingestion_program" \
  --volume "$RUN/ingested_program:/app/ingested_program" \
  --volume "$RUN/input_data:/app/input_data:ro" \
  --volume "$RUN/prediction_output:/app/output" || ING=$?
[ $ING -eq 0 ] || echo "dry_run: ingestion failed (status $ING); scoring runs anyway, as on Codabench" >&2

cp -r "$RUN/prediction_output/." "$RUN/input/res/"
chmod -R a+rX "$RUN/input"
SCO=0
run_step scoring "$RUN/scoring_program" \
  --volume "$RUN/input:/app/input" \
  --volume "$RUN/shared:/app/shared" \
  --volume "$RUN/scoring_output:/app/output" || SCO=$?

rm -rf "$OUT/predictions" "$OUT/scores"
cp -r "$RUN/prediction_output" "$OUT/predictions"
cp -r "$RUN/scoring_output" "$OUT/scores"
if [ -f "$OUT/scores/scores.json" ]; then
  echo "== scores.json ($OUT/scores/scores.json)"
  cat "$OUT/scores/scores.json"; echo
else
  echo "dry_run: no scores.json written (scoring status $SCO)" >&2
  [ $SCO -ne 0 ] || SCO=1
fi
exit $SCO
