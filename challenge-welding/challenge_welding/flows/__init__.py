"""The pipeline's flows, one module per thing a user runs: score, evaluate, leaderboard, demo, rehearse (the whole competition at a chosen size).

Each flow strings together the engine's parts, top to bottom, with its files: it owns the
order of the steps and what is written where, and computes nothing itself. A flow may
import contract, scoring, data, ingestion, report and bundle; only ``commands`` imports a
flow. The rule of every layer: tests/test_layers.py.
Modules: score.py, evaluate.py, leaderboard.py, demo.py, rehearse.py.
"""
