"""The Codabench competition bundle: build it (bundle.py), check it (validate.py), dry-run it (dry_run.py).

A shell over the engine: it packs the programs, the package and the data into the bundle's
zips and replays a worker's run on them. It may import the engine (contract, scoring, data,
ingestion, report) and the flows; only ``commands`` imports it (tests/scoring/test_layers.py).
"""
