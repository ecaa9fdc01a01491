"""The Codabench competition bundle: build it (bundle.py), check it (validate.py), dry-run it (dry_run.py).

Above the engine, below the flows: it packs the programs, the package and the data into the
bundle's zips, holds Codabench's limits and time model, and replays a worker's run on them. It
may import the engine (contract, scoring, data, ingestion, report); the flows (``rehearse``
packs a bundle, the leaderboard reads the time budget) and ``commands`` import it
(tests/test_layers.py).
Modules: bundle.py (the zip), validate.py (our checks of a bundle) with codabench_rules.py
(what Codabench itself refuses, with its message), dry_run.py (a worker's run replayed) with
worker.py (the worker as data: folders, extraction, container options), compare.py (two
scores.json against each other), logo.py (the competition logo, drawn).
"""
