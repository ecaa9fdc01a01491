"""Names fixed by the contracts (docs/contracts.md)."""

from challenge_welding.contract.registry import CRITERIA_KEYS, KPI_KEYS

SET_NAMES = ("performance", "robustness", "ood_real", "ood_synthetic", "generalization", "drift")
# The sets whose rows carry an OOD label (column `ood`): their ROC curves, the OOD charts
OOD_SETS = ("ood_real", "ood_synthetic", "drift")
CLASSES = ("KO", "OK")
STATES = ("KO", "OK", "UNKNOWN")
IN_DOMAIN_SEAMS = ("c102", "c20", "c33")
UNSEEN_SEAMS = ("c19", "c34", "c101")
PERTURBATIONS = ("blur", "luminance", "rotation", "translation")

# Source dataset (the challenge's published format): STORE/challenge-welding/datasets/<name>/metadata/ds_meta.parquet
SOURCE_META = "metadata/ds_meta.parquet"
SOURCE_COLUMNS = (
    "sample_id", "class", "timestamp", "welding-seams", "labelling_type", "resolution",
    "path", "sha256", "storage_type", "data_origin", "blur_level", "blur_class",
    "luminosity_level", "external_path",
)

# Evaluation data (output of build-sets)
INPUT_COLUMNS = ("sample_id", "path", "welding-seams", "resolution")

# Predictions (output of ingest): the starter kit's column names
PRED_COLUMNS = (
    "sample_id", "predicted_state", "scores KO", "scores OK", "scores UNKNOWN", "scores OOD",
    "compute_time",
)

# The prediction columns the scoring reads (the three probabilities, then the OOD score)
PROBA_COLUMNS = PRED_COLUMNS[2:5]
OOD_COLUMN = PRED_COLUMNS[5]

# Reference data (output of build-sets: reference_data/<set>.parquet): every set's columns,
# then each set's own (optional: labelling_type, read by the analyses, never scored)
REFERENCE_BASE_COLUMNS = ("sample_id", "class", "welding-seams")
REFERENCE_COLUMNS = {
    "performance": (), "generalization": (),
    "robustness": ("perturbation", "level"),
    "ood_real": ("ood",), "ood_synthetic": ("ood",), "drift": ("ood", "position"),
}

# scores.json keys, in leaderboard order: read from the one registry of KPIs and criteria
SCORE_KEYS = ("score",) + KPI_KEYS + CRITERIA_KEYS

# The percentile of per-image time the ingestion's timings report as time_p95 (numpy's linear
# method); the score's time_p95 follows the scoring config's time section, whose default is this
# (tests/test_package.py holds the two equal).
TIME_PERCENTILE = 95.0

# The challenge's time budget per image (s): the bundle's time limits and the board's time colours
BUDGET_S_PER_IMAGE = 1 / 12

VIRTUAL_KINDS = (
    "perfect", "very_good", "good", "no_trust", "with_trust", "full_unknown", "full_ok",
    "full_ko", "random",
)

# The store's list of datasets (the starter kit's ChallengeUI reads it; synth writes it)
DATASETS_LIST = "challenge-welding/datasets_list.yml"
