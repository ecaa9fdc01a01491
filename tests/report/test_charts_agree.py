"""No chart contradicts its number: what a chart draws, read back from its SVG, against the value it prints.

The data come from the scoring's own reductions (scoring.extras, the publication step of
scoring.disclosure) on the report fixtures' frames at a small and a large size. The drawn curve
is read from the SVG path of its gid and put back in data units through a line of known ends
drawn beside it (the ROC's chance diagonal (0, 0)-(1, 1), the retention's random line
(0, 0)-(1, mean error)), or the axes box and the chart's fixed limits (robustness, 0-1.05).
"""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from challenge_welding.report import charts
from challenge_welding.scoring.analyses.extras import compute_extras

_spec = importlib.util.spec_from_file_location("report_conftest_for_charts", Path(__file__).with_name("conftest.py"))
_conf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conf)
MIN = 25


def _path(svg: str, gid: str) -> np.ndarray | None:
    """The (x, y) pixel points of the path drawn under ``gid`` (None when not drawn)."""
    m = re.search(rf'<g id="{re.escape(gid)}">\s*<path d="([^"]+)"', svg)
    if not m:
        return None
    return np.array([(float(x), float(y)) for x, y in re.findall(r"[ML]\s*([-\d.]+)\s+([-\d.]+)", m.group(1))])


def _texts(svg: str) -> list[str]:
    return [t.replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&")
            for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def _to_data(points, ref_px, ref_data):
    """Pixel points to data units by the two ends of a reference line (its pixels and its data)."""
    (px0, py0), (px1, py1) = ref_px[0], ref_px[-1]
    (dx0, dy0), (dx1, dy1) = ref_data
    x = dx0 + (points[:, 0] - px0) / (px1 - px0) * (dx1 - dx0)
    y = dy0 + (points[:, 1] - py0) / (py1 - py0) * (dy1 - dy0)
    return x, y


def _panel(svg: str, axes_gid: str) -> str:
    """The part of the SVG from the panel whose axes carry ``axes_gid`` to the next panel."""
    start = svg.index(f'<g id="{axes_gid}">')
    nxt = re.search(r'<g id="axes_\d+">', svg[start:])
    return svg[start:start + nxt.start()] if nxt else svg[start:]


def _number_after(texts, prefix):
    for t in texts:
        m = re.search(re.escape(prefix) + r"\s*(-?\d+\.\d+)", t)
        if m:
            return float(m.group(1))
    return None


@pytest.fixture(scope="module")
def extras_by_size(scoring_config):
    """Extras of the same kind of component with 120 performance images (ood sets of 40, drift 50: one
    published step or fewer), 600 (a few steps) and 4,000 (the full twenty)."""
    return {n: compute_extras(_conf.make_frames(n, seed=1), scoring_config) for n in (120, 600, 4000)}


def _check_roc(svg, roc, name):
    """Returns what the panel shows: "curve" or "too few"; asserts it agrees with the AUROC printed."""
    texts = _texts(svg)
    printed = _number_after(texts, "AUROC =")
    curve = _path(svg, f"roc-{name}-curve")
    if curve is None:
        assert "too few images to draw:" in texts
        assert f"{roc['n']} images; a curve needs" in texts and f"two steps of {MIN} images" in texts
        assert f"AUROC = {roc['auroc']:.3f} (computed on all images)" in texts
        return "too few"
    x, y = _to_data(curve, _path(svg, f"roc-{name}-chance"), ((0, 0), (1, 1)))
    area = float(np.trapezoid(y, x))
    assert printed == pytest.approx(roc["auroc"], abs=5e-4)
    assert area == pytest.approx(np.trapezoid(roc["tpr"], roc["fpr"]), abs=2e-3)  # drawn = published steps
    if abs(area - printed) > charts.ROC_TOL:  # then the legend prints what is drawn as well
        assert _number_after(texts, "area") == pytest.approx(area, abs=2e-3)
    return "curve"


@pytest.mark.parametrize("n", [120, 600, 4000])
def test_roc_curves_agree_with_their_auroc(extras_by_size, n):
    shown = {}
    for name in ("ood_real", "ood_synthetic", "drift"):
        roc = extras_by_size[n]["roc"][name]
        svg = charts.roc_chart({name: roc}, MIN)
        shown[name] = _check_roc(svg, roc, name)
    if n == 120:  # ood sets of 40 images: one step of >= 25 only, the published curve is the diagonal
        assert shown["ood_real"] == shown["ood_synthetic"] == "too few"
    if n == 4000:
        assert set(shown.values()) == {"curve"}


def test_the_issue_case_24_images_auroc_0993_is_not_drawn_as_the_diagonal():
    """Before: the diagonal was drawn under a legend 'AUROC = 0.993' (issue 26)."""
    roc = {"fpr": [0.0, 1.0], "tpr": [0.0, 1.0], "auroc": 0.993, "n": 24, "n_ood": 12}
    svg = charts.roc_chart({"ood_real": roc}, MIN)
    assert _path(svg, "roc-ood_real-curve") is None
    assert "too few images to draw:" in _texts(svg) and "AUROC = 0.993 (computed on all images)" in _texts(svg)
    # a constant score is the diagonal and its AUROC is 0.5: drawn, no contradiction
    flat = dict(roc, auroc=0.5)
    assert _path(charts.roc_chart({"ood_real": flat}, MIN), "roc-ood_real-curve") is not None


@pytest.mark.parametrize("n", [120, 600, 4000])
def test_retention_curves_agree_with_their_r_auc(extras_by_size, scoring_config, n):
    perf = extras_by_size[n]["sets"]["performance"]
    svg = charts.retention_chart(perf["retention"], perf["n"], MIN)
    texts = _texts(svg)
    for key, res in perf["retention"].items():
        curve = _path(svg, f"retention-{key}-curve")
        if curve is None:
            assert "too few images to draw:" in texts
            assert f"{perf['n']} images; a curve needs" in texts and f"two steps of {MIN} images" in texts
            assert len(res["curve"]["retention"]) <= 2
            continue
        ref = ((0, 0), (1, res["mean_error"]))
        random_line = _path(svg, f"retention-{key}-random")
        for gid, value in (("curve", res["r_auc"]), ("oracle", res["oracle_r_auc"])):
            x, y = _to_data(_path(svg, f"retention-{key}-{gid}"), random_line, ref)
            area = float(np.trapezoid(y, x))
            label = next(t for t in _texts(_panel(svg, f"retention-{key}-axes"))
                         if t.startswith("by uncertainty" if gid == "curve" else "oracle ("))
            assert _number_after([label], "(" if gid == "oracle" else "R-AUC (") == pytest.approx(value, abs=5e-4)
            if abs(area - value) > charts.RETENTION_TOL * res["mean_error"]:
                assert _number_after([label], "drawn steps") == pytest.approx(area, abs=2e-3), label
    if n == 4000:  # twenty steps: what is drawn is the R-AUC within 5 % of the end value
        assert not any("drawn steps" in t for t in texts) and "too few images to draw:" not in texts


def test_retention_of_a_set_under_one_step_is_not_drawn(scoring_config):
    frames = _conf.make_frames(4000, seed=2)
    frames = {"performance": frames["performance"].iloc[:24].copy()}
    perf = compute_extras(frames, scoring_config)["sets"]["performance"]
    svg = charts.retention_chart(perf["retention"], perf["n"], MIN)
    assert _path(svg, "retention-misclassification-curve") is None
    assert "24 images; a curve needs" in _texts(svg) and "two steps of 25 images" in _texts(svg)


def _robustness_points(svg, kind):
    """The drawn (level, ML) points of a robustness panel: x from the first and last drawn level, y from
    the axes box and the chart's fixed y limits (0, 1.05)."""
    box = _path(svg, f"robustness-{kind}-axes")
    top, bottom = box[:, 1].min(), box[:, 1].max()
    pts = _path(svg, f"robustness-{kind}-curve")
    return pts, (bottom - pts[:, 1]) / (bottom - top) * 1.05


def test_robustness_panels_draw_their_r_and_hide_small_levels(report_details):
    rob = report_details["robustness"]
    svg = charts.robustness_chart(rob, min_samples=MIN)
    texts = _texts(svg)
    for kind, data in rob.items():
        pts, ml = _robustness_points(svg, kind)
        levels = np.asarray(data["levels"])
        x = levels[0] + (pts[:, 0] - pts[0, 0]) / (pts[-1, 0] - pts[0, 0]) * (levels[-1] - levels[0])
        r_drawn = np.trapezoid(ml, x) / (levels[-1] - levels[0])
        printed = _number_after([t for t in texts if t.startswith(f"{kind}:")], "r =")
        assert printed == pytest.approx(data["r"], abs=5e-4)
        assert r_drawn == pytest.approx(printed, abs=3e-3), kind
    # levels of fewer than 25 images: ML withheld (None). Before, they were filled down to 0.
    hidden = copy.deepcopy(rob)
    hidden["blur"]["ml"][2] = None
    hidden["rotation"]["ml"] = [None] * (len(hidden["rotation"]["ml"]) - 1) + [hidden["rotation"]["ml"][-1]]
    svg = charts.robustness_chart(hidden, min_samples=MIN)
    texts = _texts(svg)
    pts, ml = _robustness_points(svg, "blur")
    assert len(pts) == len(rob["blur"]["levels"]) - 1 and ml.min() > 0.05  # no point drawn at 0
    assert "level of < 25 images: hidden" in texts
    assert any(t.startswith("blur: r =") and t.endswith("(all levels)") for t in texts)
    assert _path(svg, "robustness-rotation-curve") is None
    assert "two levels of 25 images" in texts and "or more are needed" in texts
