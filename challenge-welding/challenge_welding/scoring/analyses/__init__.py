"""What a plant engineer asks after the score (issue 20): reported in details["analyses"], never scored.

One module per idea, each pure functions over numpy arrays (formula and undefined cases
in the docstrings): ``cost_coverage`` (operating point in cost, AURC / E-AURC / AUGRC),
``ood_detail`` (FPR at 95 % TPR, AUPR-In, AUPR-Out), ``breaking_points`` (first
perturbation level where precision breaks, mCE-style ratio to a baseline run),
``drift_delay`` (detection delay and false alarms on the drift sequence),
``localisation`` (pointing game and energy-based pointing game of explanation maps),
``annotators`` (the KPIs on expert-labelled samples), ``weight_sensitivity`` (a
winner that holds under perturbed KPI weights and rescaling breakpoints).
``assemble`` turns the merged frames into the disclosure-safe dict of details.json;
``sources`` reads the optional inputs (masks, maps, labelling types, a baseline run);
``run`` is their shell (read, compute, never fail the scoring); ``card`` gives each
analysis its rows of the metric card.

May import: numpy, pandas, challenge_welding.contract.names, challenge_welding.contract.errors and
the other scoring modules; never report.
"""
