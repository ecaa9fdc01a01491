"""The scoring engine (docs/scoring.md): every number, a functional core and a thin shell.

Owns the score, its intervals, what is reported beyond it (trust opinion, retention,
reliability, ROC, drift bins) and the leaderboard's significance; it may import contract only
(tests/test_layers.py).

Core (pure numpy, no I/O):
  metrics    each criterion (seam-weighted cost, OP, UOP, F-beta, ECE, AUROC, time percentile, level AUC)
  kpis       the six raw KPIs from their criteria
  rescale    the piecewise-linear rescaling and the final score
  criteria   all criteria of the six sets, for the point estimate or a batch of resamples
  bootstrap  the vectorised stratified bootstrap (per-cell counts)
  significance  pairwise comparisons of the leaderboard's runs from their bootstrap draws
  reliability  reliability-diagram bins of the performance set, with the score's own ECE
  retention  error-retention curves and R-AUC
  trust_opinion  subjective-logic trust opinions on the probabilities
  shortfall  where the points went: each KPI's loss in score points
  disclosure  what a published output may show (aggregates of at least min_samples)
  analyses/  the one room for what is reported, never scored: the analyses, the extras (trust
             opinion, retention, reliability, ROC and drift bins), the leaderboard's analyses
Shell:
  provenance  the checks that tie a prediction folder to its ingestion
  config     load and validate scoring.yaml into one typed, frozen object
  inputs     read and check the reference and prediction parquet files, merged into frames
  score      score_predictions(): scores.json and details.json content (analyses and extras included)
  leaderboard_significance  read the draws of several runs and compare them
  virtual    the nine virtual reference solutions
  calibrate  alpha1/alpha2 of every KPI from full_unknown and good, written into scoring.yaml
"""
