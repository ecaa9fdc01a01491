"""The front door stays short and every docs page is on the site (`make docs` builds it, strict)."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_at_most_250_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail to docs/"


def test_every_docs_page_is_in_the_site_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs"

    def pages(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from pages(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from pages(value)

    listed = set(pages(config["nav"]))
    on_disk = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert on_disk - listed == set(), "docs pages missing from mkdocs.yml's nav"
    assert listed - on_disk == set(), "nav entries without a page"


def test_readme_links_to_files_that_exist():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    missing = [t for t in targets if t and not (ROOT / t).exists()]
    assert targets and missing == []


def _make_docs(tmp_path, plant: str | None = None):
    """`make docs` (the Makefile's own target, this venv) on a copy of the docs, with ``plant``
    appended to the copy of docs/index.md."""
    import shutil
    import subprocess
    import sys

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    for name in ("Makefile", "README.md", "mkdocs.yml"):
        shutil.copy(ROOT / name, copy / name)
    # the setup target's prerequisite, already satisfied by this venv: nothing is installed
    (copy / "challenge-welding").symlink_to(ROOT / "challenge-welding")
    if plant is not None:
        with open(copy / "docs" / "index.md", "a", encoding="utf-8") as fh:
            fh.write("\n" + plant + "\n")
    venv = Path(sys.executable).parent.parent
    return subprocess.run(["make", "-s", "docs", f"VENV={venv}"], cwd=copy, capture_output=True,
                          text=True, timeout=120)


def test_make_docs_passes_on_the_docs_as_they_are(tmp_path):
    done = _make_docs(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "repo" / ".site" / "architecture.html").is_file()


@pytest.mark.parametrize("plant, said", [
    ("See [the page](no-such-page.md).", "no-such-page.md"),
    ("See [the table](contracts.md#no-such-anchor).", "no-such-anchor"),
    ("See [below](#nor-this-one).", "nor-this-one"),
])
def test_make_docs_fails_on_a_broken_link_or_anchor(tmp_path, plant, said):
    done = _make_docs(tmp_path, plant)
    assert done.returncode != 0, done.stdout + done.stderr
    assert said in done.stdout + done.stderr
