"""The results page's 'Beyond the score' section: drawn from details["analyses"], and seen in a real browser."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from challenge_welding.report.html import render_report
from challenge_welding.scoring.analyses.assemble import compute_analyses
from challenge_welding.scoring.analyses.card import card_rows

CHROMIUM = shutil.which("chromium")


def _maps_masks(frame):
    """Every KO image of the frame: a 32x32 mask (top-left quarter) and an 8x8 map; two thirds peak inside."""
    ko = list(frame.loc[frame["class"] == "KO", "sample_id"])
    maps, masks = {}, {}
    for i, sid in enumerate(ko):
        mask = np.zeros((32, 32), np.uint8)
        mask[:16, :16] = 255
        m = np.zeros((8, 8), np.uint8)
        m[(1, 1) if i % 3 else (6, 6)] = 255
        maps[sid], masks[sid] = m, mask
    return {"performance": maps}, {"performance": masks}, len(ko)


@pytest.fixture(scope="module")
def with_analyses(report_frames, scoring_config, details_factory):
    from challenge_welding.scoring.analyses.extras import compute_extras

    details = details_factory(report_frames, scoring_config)
    details["extras"] = compute_extras(report_frames, scoring_config)
    maps, masks, n_ko = _maps_masks(report_frames["performance"])
    details["analyses"] = compute_analyses(report_frames, scoring_config, maps=maps, masks=masks,
                                           robustness=details["robustness"])
    details["metric_card"]["metrics"] = details["metric_card"].get("metrics", []) + card_rows(scoring_config)
    return details, render_report(details, scoring_config), n_ko


def test_section_shows_every_analysis(with_analyses):
    details, html, n_ko = with_analyses
    a = details["analyses"]
    section = html[html.index('<section id="analyses">'):html.index('<section id="card">')]
    for anchor in ("cost-coverage", "ood-detail", "breaking-points", "drift-delay", "explanations", "annotators"):
        assert f'id="{anchor}"' in section, anchor
    assert section.count("<svg") == 3 and "chart unavailable" not in html
    for label in ("cost-coverage chart", "breaking points chart", "drift timeline chart"):
        assert label in section
    # numbers come from details, formatted by the page's own filter
    assert f"{a['cost_coverage']['gap']:.3f}" in section
    assert f"{a['ood_detail']['ood_real']['aupr_out']:.3f}" in section
    # localisation: two thirds of the maps peak in the mask
    assert a["localisation"]["all"]["n"] == n_ko
    assert a["localisation"]["all"]["pointing_game"] == pytest.approx(sum(1 for i in range(n_ko) if i % 3) / n_ko)
    assert f"{a['localisation']['all']['pointing_game']:.3f}" in section
    assert "Not available: no reference set carries labelling_type" in section
    assert "no baseline run given" in section
    # the metric card lists the analyses with their settings
    card = html[html.index('<section id="card">'):]
    assert "Pointing game, energy-based pointing game" in card and "Drift detection delay" in card


def test_no_maps_and_no_section_data_are_said_plainly(report_frames, scoring_config, details_factory):
    details = details_factory(report_frames, scoring_config)
    details["analyses"] = compute_analyses(report_frames, scoring_config)
    html = render_report(details, scoring_config)
    assert "Not provided: no maps: the submission returned no explainability output" in html
    details.pop("analyses")
    html = render_report(details, scoring_config)
    assert "The scoring wrote no analyses." in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package `chromium`)")
def test_section_in_headless_chromium(with_analyses, report_frames, scoring_config, details_factory, tmp_path):
    """The page with the analyses is drawn taller by about the section's three charts than the page without."""
    from PIL import Image

    _, html, _ = with_analyses
    plain = render_report(details_factory(report_frames, scoring_config), scoring_config)

    def last_ink_row(text, name):
        path = tmp_path / f"{name}.html"
        path.write_text(text, encoding="utf-8")
        png = tmp_path / f"{name}.png"
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", f"--user-data-dir={tmp_path / ('p' + name)}",
                        f"--screenshot={png}", "--window-size=1280,20000", "--hide-scrollbars", path.as_uri()],
                       check=True, capture_output=True, timeout=180)
        img = np.asarray(Image.open(png).convert("L"))
        return int(np.flatnonzero(img.min(axis=1) < 200).max())

    grown = last_ink_row(html, "with") - last_ink_row(plain, "without")
    assert grown > 1500, f"the analyses section adds only {grown} px"
    assert not re.search(r"https?://", html)
