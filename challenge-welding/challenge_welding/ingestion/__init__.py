"""Install a submission in isolation and run it safely and fast over the evaluation sets.

Modules, in pipeline order:
  submission   unpack a zip/folder, layout checks, requirements filtering
  environment  cached uv (or venv + pip) environment with the interface shim; device
  process      the child process: start, talk, time out, describe how it died
  child        the worker running inside the submission's environment (stdlib + numpy)
  protocol     shared-memory slots handing images to the child without a copy
  decode       background JPEG decoding (cv2, RGB uint8) into those slots
  validate     checks and normalisation of what predict() returned
  run          ingest(): the orchestration, per-set parquet files, ingestion.json
  check        check-submission: what a participant runs before uploading
"""
