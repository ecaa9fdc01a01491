"""The install: a submission on disk, and the isolated environment it runs in.

Owns unpacking and checking a submission (zip or folder, layout, requirements), and building
the cached uv (or venv + pip) environment that holds its dependencies and the interface shim:
resolved and fetched by the evaluator's installer, the submission's own package built
offline inside the sandbox. Also the device, and the target check (what the evaluator's
interpreter can install) that check-submission asks before any install.

May import: contract; ingestion.confine (the sandbox and the reaper around the build).

Modules:
  submission   unpack a zip/folder, layout checks, requirements filtering
  environment  cached uv (or venv + pip) environment with the interface shim; device; target
  disk         how much an install step of participant code may write (a watch on the disk)
"""
