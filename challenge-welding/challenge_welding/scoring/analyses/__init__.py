"""The one room for what is reported but never scored: details["analyses"], details["extras"], the leaderboard's analyses.

Fed once, from the merged frames the scoring already read (``run``: no second read of the
reference or of the predictions; only the maps and masks the score never reads are read
here). What a plant engineer asks after the score (issue 20): one module per idea, each pure functions over numpy arrays (formula and undefined cases
in the docstrings): ``cost_coverage`` (operating point in cost, AURC / E-AURC / AUGRC),
``ood_detail`` (FPR at 95 % TPR, AUPR-In, AUPR-Out), ``breaking_points`` (first
perturbation level where precision breaks, mCE-style ratio to a baseline run),
``drift_delay`` (detection delay and false alarms on the drift sequence),
``localisation`` (pointing game and energy-based pointing game of explanation maps),
``annotators`` (the KPIs on expert-labelled samples), ``weight_sensitivity`` (a
winner that holds under perturbed KPI weights and rescaling breakpoints).
``assemble`` turns the merged frames into the disclosure-safe dict of details.json;
``extras`` gives details["extras"] (trust opinion, retention curves, the page's reliability,
ROC and drift bins) and the organisers' per-sample traces; ``leaderboard`` gives the
leaderboard's columns beside the ranking (a winner that holds, the expert ranking, mCE to a
baseline row) from the scored folders' draws and details.json, each read once;
``sources`` reads the optional inputs (masks, maps, a baseline run);
``run`` is their shell (compute both blocks once, never fail the scoring); ``card`` gives each
analysis its rows of the metric card. Only scoring/score.py (the shell) imports this room:
nothing scored depends on it (tests/test_layers.py).

May import: numpy, pandas, challenge_welding.contract.names, challenge_welding.contract.errors and
the other scoring modules; never report.
"""
