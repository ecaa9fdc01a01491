"""Trustworthy-AI welding challenge: interface, data, ingestion, scoring.

Folders, each a layer (the import rule between them: tests/test_layers.py):
  contract/    the names, formats, errors and file helpers every part shares
  scoring/     the scoring engine: every number of the score and beyond it
  data/        the evaluation data: synthetic source, published format, build-sets
  ingestion/   a submission installed in isolation and run over the evaluation sets
  report/      the pages: the detailed results page, the leaderboard's HTML
  bundle/      the Codabench competition bundle, its checks and its dry run
  flows/       what a user runs, step by step (score, evaluate, leaderboard, demo, rehearse)
  commands/    the command line
Modules at the root, the published starter kit's face:
  ai_component_interface  the participant interface
  AIComponent_interface   its older import path (the same class)
  user_interface          the kit's data interface
  dataloaders             the kit's PyTorch dataset and dataloader
  inference_tools         the kit's local test of a component
  _version_               the published kit's version module
  __main__                ``python -m challenge_welding``: the command line
"""

__version__ = "1.1.0"
