"""Config loading and validation: every mistake is one clear error naming the file and the key."""

import dataclasses
from pathlib import Path

import pytest
import yaml

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.scoring.config import DEFAULT_CONFIG_PATH, Disclosure, Ml, load_config, validate_config

ROOT = Path(__file__).resolve().parents[2]


def test_default_config_has_the_spec_defaults():
    c = load_config()
    assert c.cost["KO"] == {"KO": 26.4, "OK": 3000.0, "UNKNOWN": 41.0}
    assert c.cost["OK"] == {"KO": 30.0, "OK": 0.4, "UNKNOWN": 20.0}
    assert c.seam_weights == {"c102": 0.2, "c20": 0.4, "c33": 0.4}
    assert c.default_seam_weight == pytest.approx(1 / 3)
    assert c.ml == Ml(beta=1.0, average="binary", pos_label="KO", zero_division=0.0)
    assert (c.time.percentile, c.time.method) == (95.0, "linear")
    assert dataclasses.asdict(c.kpis.perf) == {"alpha_op": 0.4, "alpha_ml": 0.6, "k_c": 1.0, "k_t": 12.0}
    assert c.kpis.uncertainty.w_ko == 0.8 and c.kpis.uncertainty.ece_bins == 10
    assert c.kpis.robustness.weights == {"blur": 0.3, "luminance": 0.3, "rotation": 0.2, "translation": 0.2}
    assert (c.kpis.ood.w_syn, c.kpis.ood.w_real) == (0.3, 0.7)
    assert c.kpis.generalization.k_op == 0.05 and c.kpis.drift.alpha_ood == 0.5
    assert (c.rescaling.beta1, c.rescaling.beta2) == (0.1, 0.9)
    assert c.rescaling.alpha["perf"].alpha1 is None
    assert c.final_weights == {"perf": 0.3, "uncertainty": 0.15, "robustness": 0.25, "ood": 0.2,
                               "generalization": 0.05, "drift": 0.05}
    assert (c.extras.bootstrap.n, c.extras.bootstrap.seed, c.extras.bootstrap.level) == (1000, 0, 0.95)
    assert (c.disclosure.min_samples, c.disclosure.points) == (25, 20)


def test_config_is_frozen_and_round_trips_to_the_yaml():
    c = load_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.kpis.perf.k_t = 0.0
    assert c.as_dict() == yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    assert validate_config(c.as_dict()) == c


def test_an_optional_section_left_out_takes_its_default(tmp_path):
    raw = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    del raw["disclosure"]
    assert validate_config(raw).disclosure == Disclosure(min_samples=25, points=20)


def test_reference_data_copy_is_byte_identical():
    assert (ROOT / "reference_data/scoring.yaml").read_bytes() == DEFAULT_CONFIG_PATH.read_bytes()


def _write(tmp_path, edit):
    raw = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())
    edit(raw)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _set(path, value):
    def edit(raw):
        node = raw
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit, key, words", [
    (_set(("kpis", "perf", "alpha_opp"), 0.4), "kpis.perf.alpha_opp", "unknown"),
    (_set(("surprise",), 1), "surprise", "unknown"),
    (lambda raw: raw["kpis"]["ood"].pop("w_syn"), "kpis.ood.w_syn", "missing"),
    (_set(("cost", "KO", "OK"), -1.0), "cost.KO.OK", ">= 0"),
    (_set(("cost", "KO"), [26.4, 3000, 41]), "cost.KO", "mapping"),
    (_set(("seam_weights",), [0.2, 0.4]), "seam_weights", "mapping"),
    (_set(("ml", "average"), "micro"), "ml.average", "one of"),
    (_set(("ml", "beta"), "one"), "ml.beta", "number"),
    (_set(("kpis", "uncertainty", "ece_bins"), 2.5), "kpis.uncertainty.ece_bins", "integer"),
    (_set(("final_weights", "perf"), 0.35), "final_weights", "sum to 1"),
    (_set(("kpis", "robustness", "weights", "blur"), 0.4), "kpis.robustness.weights", "sum to 1"),
    (_set(("kpis", "ood", "w_syn"), 0.4), "kpis.ood", "sum to 1"),
    (_set(("kpis", "perf", "alpha_ml"), 0.5), "kpis.perf", "sum to 1"),
    (_set(("kpis", "uncertainty", "w_ok"), 0.8), "kpis.uncertainty", "sum to 1"),
    (_set(("kpis", "generalization", "alpha_op"), 0.5), "kpis.generalization", "sum to 1"),
    (_set(("kpis", "drift", "alpha_op"), 0.6), "kpis.drift", "sum to 1"),
    (_set(("rescaling", "alpha", "perf"), {"alpha1": 0.1, "alpha2": None}), "rescaling.alpha.perf", "both"),
    (_set(("rescaling", "beta1"), 0.95), "rescaling.beta1", "below beta2"),
    (_set(("time", "percentile"), 120), "time.percentile", "<= 100"),
])
def test_invalid_config_is_one_clear_error(tmp_path, edit, key, words):
    path = _write(tmp_path, edit)
    with pytest.raises(ChallengeError) as info:
        load_config(path)
    msg = str(info.value)
    assert str(path) in msg and f"'{key}'" in msg and words in msg
    assert "\n" not in msg


def test_unreadable_or_invalid_yaml(tmp_path):
    with pytest.raises(ChallengeError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "x.yaml"
    bad.write_text("cost: [1, 2\n")
    with pytest.raises(ChallengeError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ChallengeError, match="top level"):
        load_config(bad)
