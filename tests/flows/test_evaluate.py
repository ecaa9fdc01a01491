"""evaluate = the real ingestion then the real scoring, on a tiny real build."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.flows.evaluate import evaluate

SOLUTIONS = Path(__file__).resolve().parents[2] / "reference-solutions"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from challenge_welding.data.build_sets import build_sets, load_build_config
    from challenge_welding.data.synth import generate_dataset

    root = tmp_path_factory.mktemp("evaluate")
    synth = generate_dataset(root / "store", n=240, seed=5, resolution=(160, 90), ko_share=0.3,
                              ood_share=0.08, progress=False)
    cfg = load_build_config().replaced(
        {"robustness": {"size": 30}, "ood_synthetic": {"size_per_class": 20}, "drift": {"size": 40}})
    return build_sets(out=root / "data", seed=1, config=cfg, progress=False, **synth.build_args())


def test_cli_evaluates_a_baseline_and_matches_score(data, tmp_path):
    from challenge_welding.scoring.score import score_predictions

    out = tmp_path / "always-ko"
    res = subprocess.run([sys.executable, "-m", "challenge_welding", "evaluate", "--submission",
                          str(SOLUTIONS / "always-ko"), "--data", str(data), "--output", str(out)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    scores = json.loads((out / "scores.json").read_text())
    assert (out / "detailed_results.html").exists()
    assert (out / "predictions" / "ingestion.json").exists()
    # Same numbers by the other route: score the predictions evaluate wrote.
    again = score_predictions(data / "reference_data", out / "predictions").scores
    assert again == scores
    # The real always-ko component answers what the virtual full_ko does: every criterion
    # that does not involve time agrees.
    from challenge_welding.scoring.virtual import make_virtual

    make_virtual(data / "reference_data", "full_ko", tmp_path / "vpred")
    virtual = score_predictions(data / "reference_data", tmp_path / "vpred").scores
    for key in ("op", "ml", "uop", "ucalib_ko", "r_blur", "r_rot", "ood_syn", "ood_real", "op_g",
                "ml_g", "op_d", "ood_d"):
        assert scores[key] == pytest.approx(virtual[key], abs=1e-9), key


def test_failures_are_one_clear_error(data, tmp_path):
    with pytest.raises(ChallengeError, match="submission .*nowhere not found"):
        evaluate(tmp_path / "nowhere", data, tmp_path / "o1")
    with pytest.raises(ChallengeError, match="input_data not found"):
        evaluate(SOLUTIONS / "always-ok", tmp_path, tmp_path / "o2")
    broken = tmp_path / "broken"
    shutil.copytree(SOLUTIONS / "always-ok", broken)
    (broken / "challenge_solution" / "AIComponent.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ChallengeError, match=r"ingestion of .*broken failed: .*ingestion.log"):
        evaluate(broken, data, tmp_path / "o3", progress=False, verbose=False)
    assert not (tmp_path / "o3" / "scores.json").exists()
