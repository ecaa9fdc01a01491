"""End to end with the scoring engine: score() on the fixture frames writes a page that agrees with scores.json.

The page's numbers come from the report's own code (reliability bins, ROC via scikit-learn,
retention curves), the scores from the scoring engine: they must meet.
"""

import json

import pytest
import yaml

from challenge_welding.contract.names import PRED_COLUMNS

REFERENCE_COLUMNS = ("sample_id", "class", "welding-seams", "perturbation", "level", "ood", "position")


@pytest.fixture(scope="module")
def scored(report_frames, scoring_config, tmp_path_factory):
    score_mod = pytest.importorskip("challenge_welding.flows.score")
    root = tmp_path_factory.mktemp("e2e")
    ref, pred, out = root / "reference_data", root / "predictions", root / "out"
    ref.mkdir()
    pred.mkdir()
    for name, df in report_frames.items():
        df[[c for c in REFERENCE_COLUMNS if c in df.columns]].to_parquet(ref / f"{name}.parquet", index=False)
        df[list(PRED_COLUMNS)].to_parquet(pred / f"{name}.parquet", index=False)
    config = scoring_config.as_dict()
    config["extras"]["bootstrap"]["n"] = 50  # intervals are not what this test checks
    (ref / "scoring.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    scores = score_mod.score(ref, pred, out, verify=False)  # hand-made predictions
    details = json.loads((out / "details.json").read_text())
    return scores, details, (out / "detailed_results.html").read_text()


def test_extras_agree_with_the_scores(scored):
    scores, details, _ = scored
    sets = details["extras"]["sets"]
    # the excess-cost retention curve ends at the set's OP (same seam weights, same costs)
    assert sets["performance"]["retention"]["excess_cost"]["mean_error"] == pytest.approx(scores["op"], rel=1e-6)
    assert sets["generalization"]["retention"]["excess_cost"]["mean_error"] == pytest.approx(scores["op_g"], rel=1e-6)
    assert sets["drift"]["retention"]["excess_cost"]["mean_error"] == pytest.approx(scores["op_d"], rel=1e-6)


def test_page_agrees_with_the_scores(scored):
    scores, details, html = scored
    assert f"{scores['score']:.2f}" in html
    assert f"ECE = {scores['ucalib_ko']:.3f}" in html and f"ECE = {scores['ucalib_ok']:.3f}" in html
    for key in ("ood_real", "ood_syn", "ood_d"):
        assert f"AUROC = {scores[key]:.3f}" in html, key
    for kind, key in (("blur", "r_blur"), ("luminance", "r_lum"), ("rotation", "r_rot"), ("translation", "r_trans")):
        assert f"{kind}: r = {scores[key]:.3f}" in html
    assert "chart unavailable" not in html
    assert not any("page failed" in w or "extras failed" in w for w in details["warnings"])
