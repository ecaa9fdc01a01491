"""The scoring engine (docs/scoring.md), a functional core and a thin shell.

Core (pure numpy, no I/O):
  metrics    each criterion (seam-weighted cost, OP, UOP, F-beta, ECE, AUROC, time percentile, level AUC)
  kpis       the six raw KPIs from their criteria
  rescale    the piecewise-linear rescaling and the final score
  criteria   all criteria of the six sets, for the point estimate or a batch of resamples
  bootstrap  the vectorised stratified bootstrap (per-cell counts)
Shell:
  config     load and validate scoring.yaml
  inputs     read and check the reference and prediction parquet files, merged into frames
  score      score(): scores.json, details.json, detailed_results.html
  virtual    the nine virtual reference solutions
  calibrate  alpha1/alpha2 of every KPI from full_unknown and good, written into scoring.yaml
"""
