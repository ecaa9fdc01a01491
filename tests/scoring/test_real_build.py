"""The validation targets on a tiny real build (synth -> build-sets, calibration included).

Runs once the data builder is in the package (challenge_welding.data.build_sets).
"""

import pytest

from challenge_welding.scoring.config import load_config
from challenge_welding.scoring.inputs import read_frames
from challenge_welding.scoring.score import score_frames
from challenge_welding.scoring.virtual import make_virtual

build_sets = pytest.importorskip("challenge_welding.data.build_sets")
synth = pytest.importorskip("challenge_welding.data.synth")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("real")
    store = synth.generate_dataset(base / "store", n=1200, seed=0)
    data = build_sets.build_sets(out=base / "data", seed=0, **store.build_args())
    return data / "reference_data"


def test_targets_on_a_tiny_real_build(built, tmp_path):
    config = load_config(built / "scoring.yaml")
    assert all(a.alpha1 is not None for a in config.rescaling.alpha.values())  # calibrated

    def score_of(kind):
        frames, _, _ = read_frames(built, make_virtual(built, kind, tmp_path / kind))
        return score_frames(frames, config, with_bootstrap=False)[0]

    assert score_of("perfect")["score"] == 100.0
    assert 80.0 <= score_of("good")["score"] <= 95.0
    assert score_of("very_good")["score"] > score_of("good")["score"]
    assert 5.0 <= score_of("full_unknown")["score"] <= 15.0
    for kind in ("full_ok", "full_ko", "random"):
        assert score_of(kind)["score"] <= 20.0
    no, wt = score_of("no_trust"), score_of("with_trust")
    assert wt["score"] >= no["score"] + 15.0 and wt["perf"] == no["perf"]
