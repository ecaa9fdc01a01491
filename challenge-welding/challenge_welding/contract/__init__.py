"""What every part agrees on: the contract's names, the criteria registry, the prediction rules, the errors.

Owns the fixed names (``names``: sets, classes, columns, score keys), the one registry
of KPIs and criteria (``registry``), the rules of one prediction row shared by the
ingestion and the scoring (``prediction_rules``), the exceptions and exit statuses
(``errors``), the explanation maps' format written by the ingestion and read by the
scoring (``explanation_maps``), the draws file of a scored run (``draws``: its one writer and its
checked reader, written by the scoring, read by the leaderboard), the file helpers (``files``: the one atomic write, sha256) and the strict
JSON writer with the checked readers and their limits (``checked``: scores.json's one writer and reader too), the config schema
engine of the scoring and build configs (``schema``), the evaluator's target
Python and platform (``target``) and a participant's text made inert (``text``). It is the
bottom layer: it imports nothing else of the package. The participant interface keeps its
published import paths at the package root (``ai_component_interface``,
``AIComponent_interface``); see tests/test_layers.py for the rule of every layer.
"""
