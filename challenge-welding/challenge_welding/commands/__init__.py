"""The command line: ``cli`` (the dispatcher and its table of commands) and one module per command.

A command module defines HELP, add_arguments(parser) and run(args) -> int: it parses, calls one
flow or engine function and prints. The top shell: it may import every other folder; nothing
imports it but the package's ``__main__`` (tests/test_layers.py).
One module per command, named after it (``dry-run``: dry_run.py): synth.py, build_sets.py,
calibrate.py, virtual.py, ingest.py, score.py, evaluate.py, leaderboard.py, demo.py,
rehearse.py, bundle.py, dry_run.py, check_submission.py, cache.py.
"""
