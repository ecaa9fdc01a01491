"""The predictions `ingest` writes are what `score` reads (docs/contracts.md, "Predictions")."""

import json
from pathlib import Path

import challenge_welding
from challenge_welding.commands import cli
from challenge_welding.ingestion.run.ingest import ingest

from ingestion_helpers import make_reference, make_submission

CONFIG = Path(challenge_welding.__file__).parent / "scoring" / "default_scoring.yaml"


def test_ingest_then_score(tmp_path, input_data, env_cache):
    sub = make_submission(tmp_path / "sub")
    pred = tmp_path / "pred"
    assert ingest(sub, input_data, pred, cache_dir=env_cache, progress=False)["status"] == "ok"
    ref = make_reference(tmp_path / "ref", CONFIG)
    assert cli.main(["score", "--reference", str(ref), "--predictions", str(pred),
                     "--output", str(tmp_path / "out")]) == 0
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    # by hand: GOOD calls every red weld KO and every other OK, so no error on the in-domain
    # sets; its OOD score (mean blue / 255) is highest exactly on the blueish OOD samples.
    assert scores["ml"] == 1.0 and scores["op"] == 0.0 and scores["ml_g"] == 1.0
    assert scores["ood_real"] == scores["ood_syn"] == scores["ood_d"] == 1.0
    assert 0 < scores["time_p95"] < 1
