"""A tiny synthetic storage root (few hundred small images, KO share raised) and one build of it."""

import pytest

from challenge_welding.data.build_sets import load_build_config
from challenge_welding.data.synth import generate_dataset

N, KO_SHARE, OOD_SHARE = 360, 0.3, 0.08


def small_config():
    """Default ladders, smaller sets so the tests stay fast."""
    cfg = load_build_config()
    cfg["robustness"]["size"] = 40
    cfg["ood_synthetic"]["size_per_class"] = 25
    cfg["drift"]["size"] = 60
    return cfg


@pytest.fixture(scope="session")
def synth(tmp_path_factory):
    """The storage root written by synth: source, unseen-seam dataset, OOD photo folder."""
    return generate_dataset(tmp_path_factory.mktemp("src") / "store", n=N, seed=3,
                            resolution=(160, 90), ko_share=KO_SHARE, ood_share=OOD_SHARE,
                            progress=False)


@pytest.fixture(scope="session")
def source(synth):
    return synth.source


@pytest.fixture(scope="session")
def built(synth, tmp_path_factory):
    from challenge_welding.data.build_sets import build_sets

    return build_sets(out=tmp_path_factory.mktemp("data") / "data", seed=7, config=small_config(),
                      progress=False, **synth.build_args())


@pytest.fixture
def cfg():
    """A fresh small builder config (tests may edit it)."""
    return small_config()
