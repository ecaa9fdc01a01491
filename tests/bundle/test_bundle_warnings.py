"""`bundle` says what is still the organiser's to decide (the image, the contact e-mail, a
Final phase on the development sets), one warning line each naming its option, and
`bundle --strict` refuses while any is left (issue 26)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from challenge_welding.bundle.bundle import organiser_decisions, placeholder_email
from challenge_welding.bundle.validate import read_competition

from .conftest import ROOT

TEMPLATE = yaml.safe_load((ROOT / "competition.yaml").read_text())


def cli(*args):
    return subprocess.run([sys.executable, "-m", "challenge_welding.commands.cli", "bundle",
                           "--repo", str(ROOT), *map(str, args)], capture_output=True, text=True)


@pytest.mark.parametrize("address, expected", [
    ("organisers@example.org", True),      # the repository's placeholder
    ("a@mail.example.com", True),          # a subdomain of a reserved domain
    ("a@b.test", True), ("a@host.invalid", True), ("", True), (None, True),
    ("a@example.fr", False),               # a real domain, though named "example"
    ("jury@challenge-welding.eu", False),
    ("a@notexample.org", False),           # not a subdomain of example.org
])
def test_placeholder_email(address, expected):
    assert placeholder_email(address) is expected


def test_the_repository_template_leaves_three_choices_open():
    lines = organiser_decisions(TEMPLATE)
    assert len(lines) == 3 and all(ln.startswith("warning: ") for ln in lines)
    image, email, final = lines
    assert "no --docker-image given" in image and "'challengewelding/evaluator:1.1.0'" in image
    assert "'organisers@example.org' is a placeholder" in email and "--contact-email ADDRESS" in email
    assert final.startswith("warning: phase 'Final': no --final-data, so it scores the development "
                            "sets again while its description says \"Final evaluation on sets no one "
                            "has seen\"") and "--final-data DATA2" in final


def test_each_option_settles_its_line_and_only_it():
    given = dict(docker_image="me/evaluator:2", contact_email="jury@challenge-welding.eu",
                 final_data=True)
    assert organiser_decisions(TEMPLATE, **given) == []
    for left_out, option in (("docker_image", "--docker-image"), ("contact_email", "--contact-email"),
                             ("final_data", "--final-data")):
        lines = organiser_decisions(TEMPLATE, **{**given, left_out: None})
        assert len(lines) == 1 and option in lines[0]
    # a placeholder given on purpose is still a placeholder
    assert len(organiser_decisions(TEMPLATE, **{**given, "contact_email": "x@example.com"})) == 1
    # an address edited into competition.yaml itself is the organiser's decision
    edited = {**TEMPLATE, "contact_email": "jury@challenge-welding.eu"}
    assert organiser_decisions(edited, docker_image="me/i:1", final_data=True) == []
    # a single phase has no Final phase to warn about
    single = {**TEMPLATE, "phases": TEMPLATE["phases"][:1]}
    assert organiser_decisions(single, docker_image="me/i:1",
                               contact_email="jury@challenge-welding.eu") == []


def test_bundle_prints_the_open_choices_last(tiny_data, tiny_solution, tmp_path):
    out = tmp_path / "b.zip"
    run = cli("--data", tiny_data, "--solution", tiny_solution, "--output", out)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[-3:] == organiser_decisions(TEMPLATE)
    assert "bundle: docker_image challengewelding/evaluator:1.1.0 (competition.yaml's: not given)" in lines
    comp = read_competition(out)  # written with the template's values, as before
    assert comp["docker_image"] == "challengewelding/evaluator:1.1.0"
    assert comp["contact_email"] == "organisers@example.org"


def test_strict_refuses_in_one_line_and_writes_nothing(tiny_data, tiny_solution, tmp_path):
    out = tmp_path / "b.zip"
    run = cli("--data", tiny_data, "--solution", tiny_solution, "--output", out,
              "--docker-image", "me/evaluator:2", "--strict")
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        "error: bundle --strict: 2 choice(s) above still left to competition.yaml's placeholders; "
        "nothing written (give the options named, or leave out --strict)"]
    assert run.stdout.splitlines() == organiser_decisions(TEMPLATE, docker_image="me/evaluator:2")
    assert not out.exists() and list(tmp_path.iterdir()) == []  # no zip, no staging left


def test_strict_with_every_choice_made(tiny_data, tiny_solution, tmp_path):
    out = tmp_path / "b.zip"
    run = cli("--data", tiny_data, "--solution", tiny_solution, "--output", out, "--strict",
              "--docker-image", "me/evaluator:2", "--contact-email", "jury@challenge-welding.eu",
              "--final-data", tiny_data, "--queue", "my-vhost")
    assert run.returncode == 0, run.stderr
    assert not [ln for ln in run.stdout.splitlines() if ln.startswith("warning")]
    assert "bundle: docker_image me/evaluator:2 (given with --docker-image)" in run.stdout.splitlines()
    comp = read_competition(out)
    assert comp["docker_image"] == "me/evaluator:2"
    assert comp["contact_email"] == "jury@challenge-welding.eu"
    assert comp["tasks"][1]["input_data"] == "input_data_final.zip"


def test_a_bad_contact_email_is_one_line_before_any_work(tiny_data, tiny_solution, tmp_path):
    run = cli("--data", tiny_data, "--solution", tiny_solution, "--output", tmp_path / "b.zip",
              "--contact-email", "jury at example")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == [
        "error: --contact-email 'jury at example': not an e-mail address (expected name@domain)"]
    assert list(tmp_path.iterdir()) == []
