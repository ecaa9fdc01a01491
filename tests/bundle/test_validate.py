"""The validator finds each problem, by hand, on broken copies of a good bundle."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import yaml

from challenge_welding.bundle.validate import validate_bundle
from challenge_welding.contract.names import SCORE_KEYS


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


def _pop(*path):
    def change(c):
        for k in path[:-1]:
            c = c[k]
        c.pop(path[-1])
    return change


# case -> (change to competition.yaml, our text, Codabench's own message or None when
# Codabench accepts it and only our contract refuses it). Codabench's messages are
# copied from its unpacker/serializers (see challenge_welding/bundle/codabench_rules.py).
BROKEN_YAML = {
    # the zip and its format
    "version 1": (_set("version", 1), "as a v1.5 bundle, a different layout", None),
    "version 3": (_set("version", 3), "version must be 2",
                  "A suitable version could not be found for this competition. Make sure one "
                  "is supplied in the yaml."),
    # competition fields
    "no title": (lambda c: c.pop("title"), "required key 'title' is missing",
                 "title: This field may not be null."),
    "title 257 chars": (_set("title", "T" * 257), "title is 257 characters, at most 256",
                        "title: Ensure this field has no more than 256 characters."),
    "docker image 129 chars": (_set("docker_image", "x/" + "y" * 127),
                               "docker_image is 129 characters, at most 128",
                               "docker_image: Ensure this field has no more than 128 characters."),
    "bad contact email": (_set("contact_email", "organisers at example.org"),
                          "is not an e-mail address",
                          "contact_email: Enter a valid email address."),
    "no docker image": (lambda c: c.pop("docker_image"), "docker_image is not set", None),
    "no detailed results": (_set("enable_detailed_results", False), "enable_detailed_results",
                            None),
    # pages, terms, logo
    "missing page": (lambda c: c["pages"].append({"title": "X", "file": "pages/nope.md"}),
                     "file 'pages/nope.md' is missing", "Unable to find page: pages/nope.md"),
    "page outside bundle": (lambda c: c["pages"].append({"title": "X", "file": "../etc.md"}),
                            "file '../etc.md' is missing", "Unable to find page: ../etc.md"),
    "no pages": (lambda c: c.pop("pages"), "required key 'pages' is missing",
                 "Unpacking the bundle failed. Here is the error log: 'NoneType' object is not "
                 "iterable"),
    "page title 256 chars": (lambda c: c["pages"][0].update(title="P" * 256),
                             "title is 256 characters, at most 255",
                             "pages: title: Ensure this field has no more than 255 characters."),
    "no terms": (lambda c: c.pop("terms"), "required key 'terms' is missing",
                 "A file containing the terms of this competition has not been supplied in the "
                 "required location"),
    "missing terms file": (_set("terms", "pages/nope.md"), "terms: file 'pages/nope.md' is "
                           "missing", "Unable to find page: pages/nope.md"),
    "no logo": (lambda c: c.pop("image"), "required key 'image' is missing",
                "An image for this competition could not be found in the yaml"),
    "missing logo": (_set("image", "nope.png"), "image: file 'nope.png' is missing",
                     "Unable to find image: nope.png"),
    # tasks
    "no tasks": (lambda c: c.pop("tasks"), "at least one task is needed",
                 "No tasks listed in this competition"),
    "task without index": (_pop("tasks", 0, "index"), "tasks[0]: no index",
                           "ERROR: No index for task: Weld inspection (six evaluation sets)"),
    "task without scoring": (_pop("tasks", 0, "scoring_program"), "no scoring_program",
                             'ERROR: Task "Weld inspection (six evaluation sets)" does not have a '
                             "scoring program"),
    "duplicate task index": (lambda c: c["tasks"].append(dict(c["tasks"][0])),
                             "duplicate index 0", "ERROR: Duplicate task indexes. Index: 0"),
    "task name 257 chars": (lambda c: c["tasks"][0].update(name="n" * 257),
                            "name is 257 characters, at most 256",
                            "name: Ensure this field has no more than 256 characters."),
    "task file missing": (lambda c: c["tasks"][0].update(input_data="nope.zip"),
                          "'nope.zip' is missing from the bundle",
                          'Cannot find dataset: "nope.zip"'),
    # solutions
    "solution for unknown task": (lambda c: c["solutions"][0].update(tasks=[3]),
                                  "solutions[0]: tasks [3]",
                                  "ERROR: Solution: None missing task index pointers"),
    "solution without index": (_pop("solutions", 0, "index"), "solutions[0]: no index",
                               "ERROR: No index for solution: None"),
    "solution without tasks": (_pop("solutions", 0, "tasks"), "solutions[0]: no tasks",
                               "Could not find tasks for solution: None"),
    "solution without path": (_pop("solutions", 0, "path"), "solutions[0]: no path (nor key)",
                              'Solution None missing "path"'),
    "solution name 257 chars": (lambda c: c["solutions"][0].update(name="s" * 257),
                                "name is 257 characters, at most 256",
                                "name: Ensure this field has no more than 256 characters."),
    "solution file missing": (lambda c: c["solutions"][0].update(path="solutions/x.zip"),
                              "'solutions/x.zip' is missing", 'Cannot find dataset: '
                                                              '"solutions/x.zip"'),
    # phases
    "final starts before dev ends": (_phase(1, start="2027-05-01 00:00:00"),
                                     "phases must be sequential",
                                     "Phases must be sequential. Phase: Finalstarts before "
                                     "Phase: Development has ended"),
    "final starts when dev ends": (_phase(1, start="2027-05-30 23:59:00"),
                                   "it must start strictly after",
                                   "Phases dates conflict. Phase: Final should start after "
                                   "Phase: Development has ended"),
    "dev has no end": (_pop("phases", 0, "end"), "needs an end",
                       "Phase: Development must have an end time because it has a phase after "
                       "it."),
    "ends before it starts": (_phase(1, end="2027-05-31 00:00:00"), "ends (2027-05-31", None),
    "not a date": (_phase(0, start="next monday"), "is not a date",
                   "Unpacking the bundle failed. Here is the error log: "),
    "no start": (_pop("phases", 0, "start"), "start is missing",
                 "phases: start: This field may not be null."),
    "phase without tasks": (_pop("phases", 0, "tasks"), "phase 'Development': no tasks",
                            "Phases must contain at least one task to be valid"),
    "phase with empty tasks": (_phase(0, tasks=[]), "is empty (Codabench accepts it", None),
    "phase with unknown task": (_phase(0, tasks=[7]), "must list existing task indexes",
                                "Unpacking the bundle failed. Here is the error log: 7"),
    "phase name 257 chars": (_phase(0, name="N" * 257), "name is 257 characters, at most 256",
                             "phases: name: Ensure this field has no more than 256 characters."),
    "bad time limit": (_phase(0, execution_time_limit="1h"), "positive number of seconds", None),
    "missing starting kit": (_phase(0, starting_kit="kit.zip"), "'kit.zip' is missing",
                             'Cannot find dataset: "kit.zip"'),
    "auto-migrate to the first phase": (_phase(0, auto_migrate_to_this_phase=True),
                                        "auto_migrate_to_this_phase on the first phase",
                                        "phases: You cannot auto migrate to the first phase of a "
                                        "competition"),
    "auto-migrate in a single phase": (lambda c: (c["phases"].pop(0),
                                                  c["phases"][0].update(index=0)),
                                       "auto_migrate_to_this_phase in a single-phase",
                                       "phases: You cannot auto migrate in a competition with "
                                       "one phase"),
    # leaderboards
    "no leaderboards": (lambda c: c.pop("leaderboards"), "at least one leaderboard is needed",
                        "Could not find leaderboards in the competition yaml"),
    "second leaderboard": (lambda c: c["leaderboards"].append(dict(c["leaderboards"][0],
                                                                   key="other")),
                           "attaches only leaderboards[0]", None),
    "leaderboard title 65 chars": (lambda c: c["leaderboards"][0].update(title="L" * 65),
                                   "title is 65 characters, at most 64",
                                   "title: Ensure this field has no more than 64 characters."),
    "leaderboard key 37 chars": (lambda c: c["leaderboards"][0].update(key="k" * 37),
                                 "key is 37 characters, at most 36",
                                 "key: Ensure this field has no more than 36 characters."),
    "submission rule with a space": (lambda c: c["leaderboards"][0].update(
        submission_rule="Force Last"), "submission_rule 'Force Last' is not one of",
        'submission_rule: "Force Last" is not a valid choice.'),
    "no columns": (lambda c: c["leaderboards"][0].update(columns=[]), "needs at least one column",
                   "columns: Leaderboards require at least 1 column"),
    "column key 37 chars": (_col(3, key="k" * 37), "is 37 characters, at most 36",
                            "columns: key: Ensure this field has no more than 36 characters."),
    "column title 37 chars": (_col(3, title="T" * 37), "is 37 characters, at most 36",
                              "columns: title: Ensure this field has no more than 36 "
                              "characters."),
    "duplicate column index": (_col(2, index=1), "column indexes are not unique",
                               "columns: Columns must have unique indexes!"),
    "duplicate column key": (_col(2, key="perf"), "column keys are not unique",
                             "columns: Columns must have unique keys!"),
    "bad sorting": (_col(0, sorting="up"), "sorting must be asc or desc",
                    'columns: sorting: "up" is not a valid choice.'),
    "computation without indexes": (_col(0, computation="avg"), "needs computation_indexes",
                                    "columns: Column with computation must have at least 1 "
                                    "column selected for the computation to act upon"),
    "computation on a missing column": (_col(0, computation="avg", computation_indexes="1,99"),
                                        "computation index 99 is not a column index",
                                        "columns: Column index 99 does not exist in available "
                                        "indexes [0, 1, 2"),
    "computation on itself": (_col(0, computation="avg", computation_indexes="0,1"),
                              "computed from itself",
                              "columns: Column with index 0 referencing itself."),
    "unknown computation": (_col(0, computation="median", computation_indexes="1"),
                            "computation must be one of avg, sum, min, max",
                            'columns: computation: "median" is not a valid choice.'),
    "computed column": (_col(0, computation="avg", computation_indexes="1"),
                        "computed columns are not filled by scores.json", None),
    "missing score key": (lambda c: _columns(c).pop(), "missing ['ood_d']", None),
    "unknown score key": (_col(1, key="accuracy"), "unknown ['accuracy']", None),
    "columns out of order": (lambda c: (_columns(c)[1].update(index=2),
                                        _columns(c)[2].update(index=1)), "not in the order", None),
    "primary is not score": (lambda c: c["leaderboards"][0].update(primary_index=1),
                             "primary column must be 'score'", None),
}


@pytest.mark.parametrize("case", sorted(BROKEN_YAML))
def test_validator_finds_each_competition_yaml_problem(bundle_dir, case):
    change, ours, theirs = BROKEN_YAML[case]
    _edit(bundle_dir, change)
    problems = validate_bundle(bundle_dir)
    [line] = [p for p in problems if ours in p] or [problems]
    if theirs is None:  # Codabench accepts it: our own contract, no Codabench message
        assert "[Codabench:" not in line, line
    else:
        assert f'[Codabench: "{theirs}' in line, line


def test_logo_types_are_codabench_s(bundle_dir):
    """Codabench takes JPEG, PNG, GIF and WebP logos; another image type, or no image, not."""
    logo = bundle_dir / "logo.png"
    for ok in (b"\xff\xd8\xff\xe0\x00\x10JFIF", b"GIF89a\x01\x00", b"RIFF\x10\x00\x00\x00WEBPVP8 "):
        logo.write_bytes(ok + b"\x00" * 32)
        assert validate_bundle(bundle_dir) == [], ok
    logo.write_bytes(b"BM" + b"\x00" * 64)  # a BMP header
    [problem] = validate_bundle(bundle_dir)
    assert problem.endswith('[Codabench: "logo: The type of the image couldn\'t be determined."]')
    logo.write_text("not a picture")
    [problem] = validate_bundle(bundle_dir)
    assert "not a JPEG, PNG, GIF or WebP" in problem
    assert problem.endswith('[Codabench: "logo: Please upload a valid image."]')


def test_quota_of_a_codabench_account(bundle_zip, bundle_dir):
    """The 15 GB quota, tried with a smaller one: the zip alone, then zip + stored datasets."""
    size = bundle_zip.stat().st_size
    assert validate_bundle(bundle_zip, quota_bytes=3 * size) == []
    [problem] = validate_bundle(bundle_zip, quota_bytes=size - 1)
    assert "over the" in problem and "Insufficient space" in problem
    # the inner zips are stored again as datasets: together about twice the zip
    [problem] = validate_bundle(bundle_zip, quota_bytes=size + 1)
    assert "plus the datasets the unpacker stores from it" in problem


def test_a_phase_date_codabench_parses(bundle_dir):
    """dateutil reads what fromisoformat would not, as Codabench does."""
    _edit(bundle_dir, _phase(1, start="June 1 2027", end="2027-06-30T23:59"))
    assert validate_bundle(bundle_dir) == []


def test_empty_terms_and_non_image_logo(bundle_dir):
    (bundle_dir / "pages" / "terms.md").write_text("")
    (bundle_dir / "logo.png").write_text("not a picture")
    problems = validate_bundle(bundle_dir)
    assert any("terms: file 'pages/terms.md' is empty" in p
               and p.endswith('[Codabench: "pages/terms.md is empty, it must contain content."]')
               for p in problems), problems
    assert any("not a JPEG, PNG, GIF or WebP" in p for p in problems), problems


@pytest.mark.parametrize("case, program, drop, replace, expected", [
    ("no command", "scoring_program.zip", (), {"metadata.yaml": b"description: x\n"},
     "metadata.yaml has no command"),
    ("no metadata", "ingestion_program.zip", ("metadata.yaml",), None, "no metadata.yaml"),
    ("script missing", "scoring_program.zip", ("score.py",), None,
     "runs /app/program/score.py, which the program does not contain"),
    ("not vendored", "ingestion_program.zip", ("vendor/challenge_welding/commands/cli.py",), None,
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
    assert validate_bundle(junk) == [f'{junk}: not a zip file [Codabench: "Bad zip file uploaded."]']
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
