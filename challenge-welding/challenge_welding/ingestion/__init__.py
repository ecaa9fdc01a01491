"""Install a submission in isolation and run it safely and fast over the evaluation sets.
It may import contract and data, never scoring (tests/test_layers.py, LAYERS).

Four rooms, one idea each; a room imports only the rooms below it (ROOMS in the same test;
each room's ``__init__`` says what it owns and lists its modules), top to bottom:
  run       the timed run: ingest(), one set's prediction, the checks of predict()'s output,
            the writer of the output folder, check-submission
  handover  the child process and what crosses to it: the worker, the wire, the per-batch
            buffers, the parent's handle that times each hand-over, the clock
  install   a submission on disk and its isolated environment (uv or venv + pip), the device
  confine   what participant code may do: sandbox, the layers beneath it, the reaper, the
            self-check of the evaluator's own files
Beside them one module, the stage's face: ``options`` (IngestOptions: every option of a run,
its default and its check; contract and the standard library only, so that the commands'
``--help`` stays instant and every room may read it). Nothing else sits here: the rooms'
modules are imported by their full path.
"""
