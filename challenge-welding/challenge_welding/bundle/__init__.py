"""The Codabench competition bundle: build it (bundle.py), check it (validate.py), dry-run it (dry_run.py).

Above the engine, below the flows: it packs the programs, the package and the data into the
bundle's zips, holds Codabench's limits and time model, and replays a worker's run on them. It
may import the engine (contract, scoring, data, ingestion, report); the flows (``rehearse``
packs a bundle, the leaderboard reads the time budget) and ``commands`` import it
(tests/test_layers.py).
"""
