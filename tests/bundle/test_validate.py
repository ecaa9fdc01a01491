"""The validator finds each problem, by hand, on broken copies of a good bundle."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import yaml

from challenge_welding.bundle.validate import validate_bundle
from challenge_welding.constants import SCORE_KEYS


def _edit(bundle_dir: Path, change) -> None:
    path = bundle_dir / "competition.yaml"
    comp = yaml.safe_load(path.read_text())
    change(comp)
    path.write_text(yaml.safe_dump(comp, sort_keys=False))


def _rewrite_zip(path: Path, drop=(), replace=None) -> None:
    """Rewrite an inner zip without the members in ``drop``, with ``replace`` {name: bytes}."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if n not in drop}
    members.update(replace or {})
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)


def _columns(comp):
    return comp["leaderboards"][0]["columns"]


def test_the_good_bundle_has_no_problem(bundle_zip, bundle_dir):
    assert validate_bundle(bundle_zip) == []
    assert validate_bundle(bundle_dir) == []


def _set(key, value):
    return lambda c: c.__setitem__(key, value)


def _phase(i, **kw):
    return lambda c: c["phases"][i].update(kw)


def _col(i, **kw):
    return lambda c: _columns(c)[i].update(kw)


BROKEN_YAML = {
    "version 1": (_set("version", 1), "version must be 2"),
    "no title": (lambda c: c.pop("title"), "required key 'title' is missing"),
    "no leaderboards": (lambda c: c.pop("leaderboards"), "required key 'leaderboards'"),
    "no docker image": (lambda c: c.pop("docker_image"), "docker_image is not set"),
    "no detailed results": (_set("enable_detailed_results", False), "enable_detailed_results"),
    "missing page": (lambda c: c["pages"].append({"title": "X", "file": "pages/nope.md"}),
                     "file 'pages/nope.md' is missing"),
    "page outside bundle": (lambda c: c["pages"].append({"title": "X", "file": "../etc.md"}),
                            "file '../etc.md' is missing"),
    "missing logo": (_set("image", "nope.png"), "image: file 'nope.png' is missing"),
    "column key 37 chars": (_col(3, key="k" * 37), "key is 37 characters, at most 36"),
    "column title 37 chars": (_col(3, title="T" * 37), "is 37 characters, at most 36"),
    "missing score key": (lambda c: _columns(c).pop(), "missing ['ood_d']"),
    "unknown score key": (_col(1, key="accuracy"), "unknown ['accuracy']"),
    "columns out of order": (lambda c: (_columns(c)[1].update(index=2),
                                        _columns(c)[2].update(index=1)), "not in the order"),
    "duplicate column index": (_col(2, index=1), "column indexes are not unique"),
    "primary is not score": (lambda c: c["leaderboards"][0].update(primary_index=1),
                             "primary column must be 'score'"),
    "bad sorting": (_col(0, sorting="up"), "sorting must be asc or desc"),
    "computed column": (_col(0, computation="avg"), "computed columns"),
    "final starts before dev ends": (_phase(1, start="2027-05-01 00:00:00"),
                                     "phases must be sequential"),
    "final starts when dev ends": (_phase(1, start="2027-05-30 23:59:00"),
                                   "phases must be sequential"),
    "dev has no end": (lambda c: c["phases"][0].pop("end"), "needs an end"),
    "ends before it starts": (_phase(1, end="2027-05-31 00:00:00"), "ends (2027-05-31"),
    "not a date": (_phase(0, start="next monday"), "is missing or not a date"),
    "phase with unknown task": (_phase(0, tasks=[7]), "must list existing task indexes"),
    "bad time limit": (_phase(0, execution_time_limit="1h"), "positive number of seconds"),
    "missing starting kit": (_phase(0, starting_kit="kit.zip"), "'kit.zip' is missing"),
    "task without scoring": (lambda c: c["tasks"][0].pop("scoring_program"),
                             "no scoring_program"),
    "duplicate task index": (lambda c: c["tasks"].append(dict(c["tasks"][0])),
                             "duplicate index 0"),
    "solution for unknown task": (lambda c: c["solutions"][0].update(tasks=[3]),
                                  "solutions[0]: tasks [3]"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_YAML))
def test_validator_finds_each_competition_yaml_problem(bundle_dir, case):
    change, expected = BROKEN_YAML[case]
    _edit(bundle_dir, change)
    problems = validate_bundle(bundle_dir)
    assert any(expected in p for p in problems), problems


def test_empty_terms_and_non_image_logo(bundle_dir):
    (bundle_dir / "pages" / "terms.md").write_text("")
    (bundle_dir / "logo.png").write_text("not a picture")
    problems = validate_bundle(bundle_dir)
    assert any("terms: file 'pages/terms.md' is empty" in p for p in problems), problems
    assert any("not a PNG, JPEG or GIF" in p for p in problems), problems


@pytest.mark.parametrize("case, program, drop, replace, expected", [
    ("no command", "scoring_program.zip", (), {"metadata.yaml": b"description: x\n"},
     "metadata.yaml has no command"),
    ("no metadata", "ingestion_program.zip", ("metadata.yaml",), None, "no metadata.yaml"),
    ("script missing", "scoring_program.zip", ("score.py",), None,
     "runs /app/program/score.py, which the program does not contain"),
    ("not vendored", "ingestion_program.zip", ("vendor/challenge_welding/cli.py",), None,
     "vendor/challenge_welding/ is missing"),
    ("set missing", "input_data.zip", ("drift/metadata.parquet",), None,
     "missing or empty drift/metadata.parquet"),
    ("config missing", "reference_data.zip", ("scoring.yaml",), None,
     "missing or empty scoring.yaml"),
])
def test_validator_finds_each_program_and_data_problem(bundle_dir, case, program, drop, replace,
                                                       expected):
    _rewrite_zip(bundle_dir / program, drop=drop, replace=replace)
    problems = validate_bundle(bundle_dir)
    assert any(expected in p for p in problems), problems


def test_data_folder_in_a_subfolder_of_the_zip_is_caught(bundle_dir):
    path = bundle_dir / "reference_data.zip"
    with zipfile.ZipFile(path) as zf:
        members = {f"reference_data/{n}": zf.read(n) for n in zf.namelist()}
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)
    problems = validate_bundle(bundle_dir)
    assert any("files must be at the zip root" in p for p in problems), problems


def test_corrupt_or_empty_inner_zip(bundle_dir):
    (bundle_dir / "input_data.zip").write_bytes(b"PK-not-really")
    with zipfile.ZipFile(bundle_dir / "starting_kit.zip", "w") as zf:
        zf.writestr("README.md", "")
    problems = validate_bundle(bundle_dir)
    assert any("'input_data.zip' is missing from the bundle or is not a readable zip" in p
               for p in problems), problems
    assert any("'starting_kit.zip' is empty" in p for p in problems), problems


def test_competition_yaml_not_at_the_zip_root(bundle_zip, tmp_path):
    nested = tmp_path / "nested.zip"
    with zipfile.ZipFile(bundle_zip) as src, zipfile.ZipFile(nested, "w") as dst:
        for n in src.namelist():
            dst.writestr(f"my-bundle/{n}", src.read(n))
    [problem] = validate_bundle(nested)
    assert "not at the zip root" in problem and "my-bundle/competition.yaml" in problem


def test_not_a_zip_and_missing_path(tmp_path):
    junk = tmp_path / "bundle.zip"
    junk.write_text("hello")
    assert validate_bundle(junk) == [f"{junk}: not a zip file"]
    assert "no such file" in validate_bundle(tmp_path / "nope.zip")[0]


def test_every_problem_is_listed_at_once(bundle_dir):
    def many(c):
        c.pop("title")
        _columns(c)[0]["title"] = "x" * 40
        c["phases"][0].pop("end")

    _edit(bundle_dir, many)
    assert len(validate_bundle(bundle_dir)) >= 3


def test_score_keys_are_what_the_validator_expects():
    # a guard on the guard: the validator's reference list is the contract's
    assert SCORE_KEYS[0] == "score" and len(SCORE_KEYS) == 23


def test_a_dataset_key_stands_for_data_uploaded_separately(bundle_dir):
    key = "2f1c3a9e-5b7d-4c1e-9a2b-3d4e5f6a7b8c"
    _edit(bundle_dir, lambda c: c["tasks"][0].update(input_data=key))
    (bundle_dir / "input_data.zip").unlink()
    assert validate_bundle(bundle_dir) == []
    _edit(bundle_dir, lambda c: c["tasks"][0].update(input_data="not-a-key"))
    assert any("'not-a-key' is missing" in p for p in validate_bundle(bundle_dir))
