"""Unpacking, layout checks and requirement filtering of submission folders."""

import zipfile

import pytest

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.ingestion.install import submission as sub

from ingestion_helpers import make_submission


def test_filter_requirements_drops_only_the_starter_kit_pin():
    text = "pandas==2.2.3\n# comment\nChallenge_Welding == 1.0  # interface\nnumpy==1.26.4\n-r extra.txt\n"
    kept, dropped = sub.filter_requirements(text)
    assert dropped == "Challenge_Welding == 1.0"
    assert kept == "pandas==2.2.3\n# comment\nnumpy==1.26.4\n-r extra.txt\n"
    assert sub.pinned_version(dropped) == "1.0"
    assert sub.pinned_version("challenge-welding>=1.0") is None
    assert sub.filter_requirements("numpy\n") == ("numpy\n", None)
    assert sub.filter_requirements("challenge-welding-extras==2\n")[1] is None


def test_unpack_zip_with_contents_in_one_top_folder(tmp_path):
    src = make_submission(tmp_path / "src", manifest="include challenge_solution/model.bin\n",
                          extra={"challenge_solution/model.bin": "weights"})
    archive = tmp_path / "s.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("__MACOSX/._x", "junk")
        for f in src.rglob("*"):
            zf.write(f, "top/" + f.relative_to(src).as_posix())
    root = sub.unpack(archive, tmp_path / "work")
    assert root == tmp_path / "work" / "submission" / "top"
    assert (root / "challenge_solution" / "model.bin").read_text() == "weights"
    assert sub.layout_problems(root) == []


def test_unpack_refuses_unsafe_zip_members(tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../outside.txt", "x")
    with pytest.raises(ChallengeError, match="unsafe member '../outside.txt'"):
        sub.unpack(archive, tmp_path / "work")
    with pytest.raises(ChallengeError, match="submission not found"):
        sub.unpack(tmp_path / "nope.zip", tmp_path / "work")


def test_layout_problems_name_the_fix(tmp_path):
    root = make_submission(tmp_path / "s", component="class Other:\n    pass\n", setup=None,
                           requirements=None, extra={"challenge_solution/model.h5": "w"})
    problems = {p.message: p for p in sub.layout_problems(root)}
    assert problems["no setup.py or pyproject.toml at the submission's root"].fatal
    assert not problems["no requirements.txt"].fatal
    assert "defines no class MyAIComponent" in " ".join(problems)
    manifest = next(p for m, p in problems.items() if "MANIFEST.in" in m)
    assert "include challenge_solution/model.h5" in manifest.fix


def test_interface_checks_on_the_class(tmp_path):
    root = make_submission(tmp_path / "s", component=(
        "class MyAIComponent:\n"
        "    def load_model(self, path):\n        pass\n"
        "    def predict(self, images):\n        pass\n"))
    messages = [p.message for p in sub.layout_problems(root)]
    assert messages == [
        "MyAIComponent does not subclass AbstractAIComponent (bases: none)",
        "MyAIComponent.load_model requires 1 argument(s); the evaluator calls load_model() with none",
        "MyAIComponent.predict takes ['self', 'images'], expected (self, input_images, "
        "images_meta_informations, device='cuda')"]
    assert not any(p.fatal for p in sub.layout_problems(root))


def test_a_codabench_metadata_file_in_the_submission_is_refused(tmp_path):
    root = make_submission(tmp_path / "s", extra={"metadata.yaml": "command: python3 cheat.py\n"})
    (problem,) = sub.layout_problems(root)
    assert problem.fatal and problem.message == "a file named metadata.yaml at the submission's root"
    assert "Codabench would run it" in problem.fix
