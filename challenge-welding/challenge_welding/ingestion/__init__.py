"""Install a submission in isolation and run it safely and fast over the evaluation sets.
It may import contract, scoring and data (tests/scoring/test_layers.py).

Modules, in pipeline order:
  submission   unpack a zip/folder, layout checks, requirements filtering
  environment  cached uv (or venv + pip) environment with the interface shim; device
  process      the child process: start, hand batches over and time them, end it
  child        the worker running inside the submission's environment (stdlib + numpy)
  protocol     nameless per-batch memory files handing images to the child without a copy
  decode       background JPEG decoding (cv2, RGB uint8) into those buffers
  reaper       subreaper, non-dumpable, and killing every process of the submission
  validate     checks and normalisation of what predict() returned
  predict      predict one set: answers and timings in memory, no file written
  write        the writer: set files from memory, atomic, with their sha256 manifest
  options      IngestOptions: every option of a run, its default and its check (stdlib only)
  run          ingest(): the orchestration, the run report, ingestion.json
  check        check-submission: what a participant runs before uploading
"""
