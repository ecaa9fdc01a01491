"""The front door stays short and every docs page is on the site (`make docs` builds it, strict)."""

import re
from pathlib import Path

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
