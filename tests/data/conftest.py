"""A tiny synthetic storage root (few hundred small images, KO share raised) and one build of it."""

import pytest

from challenge_welding.data.build_sets import load_build_config
from challenge_welding.data.synth import generate_dataset

N, KO_SHARE, OOD_SHARE = 360, 0.3, 0.08


def small_config():
    """Default ladders, smaller sets so the tests stay fast."""
    return load_build_config().replaced(
        {"robustness": {"size": 40}, "ood_synthetic": {"size_per_class": 25}, "drift": {"size": 60}})


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
    """The small builder config (frozen: a test changes it with ``cfg.replaced({...})``)."""
    return small_config()


PYARROW_PIN = ("pyarrow==19.0.0", "numpy==2.2.6", "pandas==2.2.3")  # the starter kit's pyarrow


@pytest.fixture(scope="session")
def pyarrow19(request):
    """The python of a scratch venv with the starter kit's pyarrow==19.0.0 (real install, uv).

    Kept in the pytest cache (.pytest_cache/d/pyarrow19-venv), so a machine or CI run
    installs it once; a file lock keeps parallel workers from building it twice.
    """
    import fcntl
    import subprocess
    import sys

    from uv import find_uv_bin

    root = request.config.cache.mkdir("pyarrow19-venv")
    python = root / "venv" / "bin" / "python"
    marker = root / "venv" / ".complete"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists() or marker.read_text() != " ".join(PYARROW_PIN):
            uv = find_uv_bin()
            subprocess.run([uv, "venv", "-q", "--clear", "-p", sys.executable, str(root / "venv")], check=True)
            subprocess.run([uv, "pip", "install", "-q", "--python", str(python), *PYARROW_PIN], check=True)
            marker.write_text(" ".join(PYARROW_PIN))
    return python
