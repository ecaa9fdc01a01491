"""The planners (one per set) give the same sets for the same seed as before their split.

The digests below were recorded on the single 86-line plan_sets of commit 8f95ec2 (before
the refactor): sha256 of the (sample_id, class, operation, level, labels) of every item in
order, and the sorted training ids. Any change in a planner's draws changes them.
"""

import hashlib
import json

import pytest

from challenge_welding.data.build_sets import load_build_config, plan_sets, read_sources
from challenge_welding.data.synth import generate_dataset

RECORDED = {
    "performance": ("b8ea100cb6fe4e85", 32),
    "robustness": ("32bf32120295459f", 704),
    "ood_synthetic": ("f8fb116bcde554d9", 32),
    "ood_real": ("c4fb01802df65983", 32),
    "generalization": ("a442bd294afdaa5c", 24),
    "drift": ("2ac1bd4f07abb480", 60),
    "training": ("c9ab0f5b2f432816", 128),
}


@pytest.fixture(scope="module")
def meta(tmp_path_factory):
    store = generate_dataset(tmp_path_factory.mktemp("plan") / "store", n=200, seed=4,
                             resolution=(64, 36), ko_share=0.3, ood_share=0.08, progress=False,
                             workers=1)
    meta = read_sources(store.source, load_build_config(), [store.unseen], store.ood, 1, False)
    meta.attrs.pop("source_rows")
    return meta


def _digest(meta, items):
    rows = [(str(meta.loc[i["row"], "sample_id"]), str(meta.loc[i["row"], "class"]), i["op"][0],
             str(i["op"][1]), json.dumps(i["labels"], sort_keys=True)) for i in items]
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16], len(items)


def test_same_seed_same_sets_as_before_the_refactor(meta, cfg):
    sets, training = plan_sets(meta, cfg, 11)  # cfg: conftest's small config
    got = {name: _digest(meta, items) for name, items in sets.items()}
    ids = sorted(str(meta.loc[i, "sample_id"]) for i in training)
    got["training"] = (hashlib.sha256(repr(ids).encode()).hexdigest()[:16], len(training))
    assert got == RECORDED
