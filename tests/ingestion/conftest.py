import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ingestion_helpers import make_input_data


@pytest.fixture(scope="session")
def input_data(tmp_path_factory):
    return make_input_data(tmp_path_factory.mktemp("input_data"))


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory):
    """One environment cache for the whole session: submissions with identical requirements
    share one environment (the cache is keyed by their hash), so only the first test pays
    for `uv venv` + install (from uv's download cache, a few seconds)."""
    # laid out as $XDG_CACHE_HOME/challenge-welding/envs, the default location, so that a
    # subprocess given XDG_CACHE_HOME shares it too
    path = tmp_path_factory.mktemp("xdg") / "challenge-welding" / "envs"
    path.mkdir(parents=True)
    return path
