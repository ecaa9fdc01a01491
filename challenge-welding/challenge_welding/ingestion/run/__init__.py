"""The timed run: a submission over the evaluation sets, from pixels in to files out.

Owns ``ingest()`` (the orchestration, the run report, ingestion.json), one set's prediction
(decode ahead, hand over, time, validate; answers in memory), the checks of what predict()
returned, the writer of the output folder, and check-submission, which runs the same
``ingest`` on a few synthetic images before a participant uploads.

May import: contract, data; ingestion.confine, ingestion.install, ingestion.handover.

Modules, in pipeline order:
  ingest    ingest(): the orchestration, the run report, ingestion.json
  decode    background JPEG decoding (cv2, RGB uint8) into the hand-over buffers
  predict   predict one set: answers and timings in memory, no file written
  validate  checks and normalisation of what predict() returned
  write     the writer: set files from memory, atomic, with their sha256 manifest
  check     check-submission: what a participant runs before uploading
"""
