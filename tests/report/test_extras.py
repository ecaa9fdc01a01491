"""compute_extras on the fixture frames: JSON-clean, OOD rows left out, values by independent routes."""

import json

import numpy as np
import pytest

from challenge_welding.scoring.analyses.extras import compute_extras
from challenge_welding.scoring.retention import retention_aucs


def test_extras_are_strict_json_and_cover_every_set(report_frames, scoring_config):
    extras = compute_extras(report_frames, scoring_config)
    json.dumps(extras, allow_nan=False)
    assert list(extras["sets"]) == list(report_frames)
    drift = extras["sets"]["drift"]
    assert drift["n_excluded_ood"] == int(report_frames["drift"]["ood"].sum())
    assert drift["n"] + drift["n_excluded_ood"] == len(report_frames["drift"])
    curve = extras["sets"]["performance"]["retention"]["misclassification"]["curve"]
    # 4000 samples, 20 published steps of 200 (was up to 202 points, one per error: issue 10)
    assert curve["retention"] == pytest.approx([j / 20 for j in range(21)])


def test_performance_values_match_direct_computation(report_frames, report_details, scoring_config):
    df = report_frames["performance"]
    extras = compute_extras(report_frames, scoring_config)["sets"]["performance"]
    err = (df["predicted_state"] != df["class"]).to_numpy(float)
    unc = 1 - np.maximum(df["scores KO"], df["scores OK"]).to_numpy()
    ret = extras["retention"]["misclassification"]
    assert ret["r_auc"] == pytest.approx(retention_aucs(err, unc)["r_auc"])
    assert ret["mean_error"] == pytest.approx(err.mean())
    # the excess-cost curve ends at the set's OP, computed here from the per-set costs
    s = report_details["sets"]["performance"]
    op = (s["cost"] - s["cost_ideal"]) / (s["cost_human"] - s["cost_ideal"])
    assert extras["retention"]["excess_cost"]["mean_error"] == pytest.approx(op)
    assert extras["retention"]["excess_cost"]["curve"]["value"][-1] == pytest.approx(op)
    trust = extras["trust"]
    assert trust["classes"]["KO"]["opinion"]["r"] == (df["class"] == "KO").sum()
    assert trust["model"]["r"] == len(df)
    for o in (trust["model"], trust["classes"]["OK"]["opinion"]):
        assert o["b"] + o["d"] + o["u"] == pytest.approx(1.0)


def test_missing_and_empty_sets(report_frames, scoring_config):
    frames = {"performance": report_frames["performance"].iloc[:0], "drift": report_frames["drift"]}
    extras = compute_extras(frames, scoring_config)
    assert extras["skipped"] == ["performance"] and list(extras["sets"]) == ["drift"]
    assert compute_extras({}, {})["sets"] == {}
    # a set with no true KO says so
    ok_only = report_frames["generalization"][report_frames["generalization"]["class"] == "OK"]
    cases = compute_extras({"generalization": ok_only}, scoring_config)["sets"]["generalization"]["undefined_cases"]
    assert [c["case"] for c in cases] == ["no true KO sample"]
