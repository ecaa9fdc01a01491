"""The criteria registry drives invariance tests over every criterion (in the manner of scikit-learn's ALL_METRICS)."""

import numpy as np
import pytest

from challenge_welding.contract.names import CRITERIA_KEYS, KPI_KEYS, SET_NAMES
from challenge_welding.scoring.config import load_config, validate_config
from challenge_welding.scoring.criteria import compute, prepare
from challenge_welding.scoring.inputs import read_frames
from challenge_welding.contract.registry import (
    BY_KEY, CRITERIA, KPIS, ROBUSTNESS_KEYS, kpi_criteria, lower_better_keys, metric_card_rows,
)
from challenge_welding.scoring.virtual import make_virtual


@pytest.fixture(scope="module")
def setup(reference_dir, tmp_path_factory):
    config = load_config(reference_dir / "scoring.yaml")
    base = tmp_path_factory.mktemp("registry")
    frames = {kind: read_frames(reference_dir, make_virtual(reference_dir, kind, base / kind, seed=4))[0]
              for kind in ("perfect", "random", "with_trust")}
    return config, frames


def test_registry_is_what_the_score_computes(setup):
    config, frames = setup
    res = compute(prepare(frames["random"], config), config)
    assert tuple(res["criteria"]) == CRITERIA_KEYS == tuple(c.key for c in CRITERIA)
    assert tuple(res["raw"]) == KPI_KEYS == tuple(k.key for k in KPIS)
    assert {c.set for c in CRITERIA} == set(SET_NAMES) and {c.kpi for c in CRITERIA} == set(KPI_KEYS)
    assert all(kpi_criteria(k) for k in KPI_KEYS)
    assert ROBUSTNESS_KEYS == {"blur": "r_blur", "luminance": "r_lum", "rotation": "r_rot", "translation": "r_trans"}
    # every criterion's metric has a metric-card row that names it
    named = {key for row in metric_card_rows(config) for key in row["criteria"]}
    assert named == set(CRITERIA_KEYS)


@pytest.mark.parametrize("kind", ["random", "with_trust"])
@pytest.mark.parametrize("criterion", CRITERIA, ids=lambda c: c.key)
def test_sample_order_invariance(setup, kind, criterion):
    """Shuffling the rows of every set leaves each criterion unchanged."""
    config, frames = setup
    rng = np.random.default_rng(7)
    shuffled = {name: f.sample(frac=1.0, random_state=int(rng.integers(1 << 30))).reset_index(drop=True)
                for name, f in frames[kind].items()}
    assert not shuffled[criterion.set]["sample_id"].equals(frames[kind][criterion.set]["sample_id"])
    a = compute(prepare(frames[kind], config), config)["criteria"][criterion.key]
    b = compute(prepare(shuffled, config), config)["criteria"][criterion.key]
    assert float(b) == pytest.approx(float(a), abs=1e-12)


@pytest.mark.parametrize("criterion", CRITERIA, ids=lambda c: c.key)
def test_better_direction(setup, criterion):
    """The perfect solution is at least as good as random on every criterion, in the registry's direction."""
    config, frames = setup
    perfect, random = (float(compute(prepare(frames[k], config), config)["criteria"][criterion.key])
                       for k in ("perfect", "random"))
    if criterion.better == "higher":
        assert perfect >= random
    else:
        assert perfect <= random
    if criterion.key != "time_p95":  # both 0: virtual answers take no time
        assert perfect != random


def test_lower_better_keys_for_the_leaderboard():
    assert lower_better_keys() == {"op", "time_p95", "ucalib_ko", "ucalib_ok", "op_g", "op_d"}
    assert all(BY_KEY[k].better == "lower" for k in lower_better_keys())


def test_kpi_formulas_carry_the_config_coefficients():
    config = load_config()
    formulas = {k.key: k.formula(config) for k in KPIS}
    assert formulas["perf"] == "I_perf = (0.4 e^(-1 OP) + 0.6 ML) / (1 + 12 ln(1 + t))"
    assert formulas["ood"] == "I_ood = 0.3 AUROC_syn + 0.7 AUROC_real"
    assert formulas["robustness"] == "I_rob = 0.3 r_blur + 0.3 r_luminance + 0.2 r_rotation + 0.2 r_translation"
    raw = config.as_dict()
    raw["kpis"]["drift"]["k_op"] = 0.07
    assert KPIS[-1].formula(validate_config(raw)) == "I_drift = 0.5 e^(-0.07 OP_d) + 0.5 AUROC_d"


def test_set_functions_run_with_their_defaults(setup):
    """A set's criteria function needs no collector of undefined cases (its default discards them)."""
    from challenge_welding.scoring.criteria import performance_criteria

    config, frames = setup
    a = prepare(frames["random"], config)["performance"]
    c, extra = performance_criteria(a, config)
    full = compute(prepare(frames["random"], config), config)["criteria"]
    assert {k: float(v) for k, v in c.items()} == pytest.approx({k: float(full[k]) for k in c})
    assert len(extra["costs"]) == 4
