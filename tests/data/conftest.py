"""A tiny synthetic source (few hundred small images, KO share raised) and one build of it."""

import pytest

from challenge_welding.data.build_sets import load_build_config
from challenge_welding.data.synth import generate_dataset

N, KO_SHARE = 360, 0.3


def small_config():
    """Default ladders, smaller sets so the tests stay fast."""
    cfg = load_build_config()
    cfg["robustness"]["size"] = 40
    cfg["ood_synthetic"]["size_per_class"] = 25
    cfg["drift"]["size"] = 60
    return cfg


@pytest.fixture(scope="session")
def source(tmp_path_factory):
    return generate_dataset(tmp_path_factory.mktemp("src") / "source", n=N, seed=3,
                            resolution=(160, 90), ko_share=KO_SHARE, ood_share=0.08, progress=False)


@pytest.fixture(scope="session")
def built(source, tmp_path_factory):
    from challenge_welding.data.build_sets import build_sets

    return build_sets(source, tmp_path_factory.mktemp("data") / "data", seed=7,
                      config=small_config(), progress=False)


@pytest.fixture
def cfg():
    """A fresh small builder config (tests may edit it)."""
    return small_config()
