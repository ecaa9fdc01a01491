"""Any screen: the results page and the leaderboard at 1,280 and 390 px in headless Chromium, nothing wider.

Real pages: virtual predictions scored on a small calibrated reference (the scoring tests'
generator) with their draws, and a leaderboard of them with the nine virtual reference rows.

Chromium (156) will not open a window narrower than 500 px, so the width is set through the
DevTools protocol (Emulation.setDeviceMetricsOverride, as a phone: ``mobile`` makes it honour
the page's viewport meta, and a page without one is laid out at 980 px, as on a phone). The
protocol runs over ``--remote-debugging-pipe`` (NUL-terminated JSON on fds 3 and 4): no
websocket library, which the project does not depend on, and no port.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: run "
                                "`bash scripts/install-chromium.sh` (Debian/Ubuntu package chromium)")
WIDTHS = (1280, 390)

# Elements sticking out of the viewport, those inside a box that scrolls (or clips) excepted.
OVERFLOW_PROBE = """(() => {
  const vw = window.innerWidth, out = [];
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || (r.right <= vw + 0.5 && r.left >= -0.5)) continue;
    let p = el.parentElement, boxed = false;
    for (; p && p !== document.body; p = p.parentElement) {
      if (["auto", "scroll", "hidden"].includes(getComputedStyle(p).overflowX)) { boxed = true; break; }
    }
    if (!boxed) out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + " right=" + Math.round(r.right));
  }
  return JSON.stringify({inner: window.innerWidth, scroll: document.documentElement.scrollWidth,
                         height: document.documentElement.scrollHeight, over: out.slice(0, 12)});
})()"""


class Browser:
    """Headless Chromium driven over the DevTools pipe: one page, its size, load, evaluate, screenshot."""

    def __init__(self, profile: Path):
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        def on_fds():  # the protocol's fds are 3 (commands in) and 4 (answers out)
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)  # a pipe may already sit on fd 3
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
             "--hide-scrollbars", f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=on_fds, close_fds=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf, self._id = b"", 0
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=True)

    def send(self, method, params=None, session=False):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        answer = self._until(lambda m: m.get("id") == self._id)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def _until(self, wanted):
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            msg = json.loads(raw)
            if wanted(msg):
                return msg

    def open(self, path: Path, width: int, height: int = 900) -> dict:
        """Load ``path`` on a ``width`` px screen; the overflow probe's answer."""
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 800}, session=True)
        self.send("Page.navigate", {"url": path.as_uri()}, session=True)
        self._until(lambda m: m.get("method") == "Page.loadEventFired")
        return json.loads(self.evaluate(OVERFLOW_PROBE))

    def evaluate(self, expression: str):
        return self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                         session=True)["result"]["value"]

    def screenshot(self, height: int | None = None) -> bytes:
        """PNG of the viewport, or of the top ``height`` px of the page."""
        params = {"format": "png"}
        if height:
            width = self.evaluate("window.innerWidth")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": width, "height": height,
                                                             "scale": 1})
        return base64.b64decode(self.send("Page.captureScreenshot", params, session=True)["data"])

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self._w)
        os.close(self._r)


def _make_reference():
    spec = importlib.util.spec_from_file_location("scoring_conftest_for_screens",
                                                  Path(__file__).resolve().parents[1] / "scoring" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_reference


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """{"results": a scored folder's page, "leaderboard": a board with significance and virtual rows}."""
    import yaml

    from challenge_welding.flows.leaderboard import leaderboard
    from challenge_welding.flows.score import score
    from challenge_welding.scoring.calibrate import calibrate
    from challenge_welding.contract.draws import draws_path
    from challenge_welding.scoring.virtual import make_virtual

    base = tmp_path_factory.mktemp("screens")
    ref = _make_reference()(base / "reference_data", n_perf=600, seed=3)
    calibrate(ref)
    config = yaml.safe_load((ref / "scoring.yaml").read_text())
    config.setdefault("extras", {}).setdefault("bootstrap", {})["n"] = 200  # enough for a rank interval
    (ref / "scoring.yaml").write_text(yaml.safe_dump(config))
    runs = []
    for name, kind in (("a-team_with_a_long_name", "with_trust"), ("r_blur_fan", "random"), ("no_trust", "no_trust")):
        out = base / "scored" / name
        score(ref, make_virtual(ref, kind, base / "pred" / name), out, draws_path=draws_path(out))
        runs.append(out)
    leaderboard(runs, base / "board", virtual_data=base, virtual_dir=base / "virtual")
    return {"results": runs[0] / "detailed_results.html", "leaderboard": base / "board.html"}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", ["results", "leaderboard"])
def test_nothing_is_wider_than_the_screen(pages, browser, page, width):
    from PIL import Image

    probe = browser.open(pages[page], width)
    assert probe["inner"] == width, f"{page} laid out at {probe['inner']} px on a {width} px screen (viewport meta?)"
    assert probe["scroll"] <= width, f"{page} is {probe['scroll']} px wide at {width} px: {probe['over']}"
    assert probe["over"] == []
    png = Image.open(io.BytesIO(browser.screenshot()))
    assert png.size == (width, 900)
    pixels = np.asarray(png.convert("L"))
    assert (pixels < 200).mean() > 0.02, "blank screenshot"


def test_narrow_tables_and_charts_scroll_in_their_own_box_and_stay_legible(pages, browser):
    browser.open(pages["results"], 390)
    # the KPI table keeps rows of a readable height: its "how" column is not squeezed to a sliver
    tallest = browser.evaluate("Math.max(...[...document.querySelectorAll('#kpis tr.kpi')].map(r => r.offsetHeight))")
    assert tallest < 260, f"a KPI row is {tallest} px tall at 390 px"
    boxes = browser.evaluate("""JSON.stringify([...document.querySelectorAll('.chartbox')].map(b =>
        [b.clientWidth, b.scrollWidth, b.querySelector('svg').getBoundingClientRect().width]))""")
    boxes = json.loads(boxes)
    assert len(boxes) >= 7
    for client, scroll, svg in boxes:
        assert client <= 390 and svg >= 560, "a chart shrunk below its legible width"
        assert scroll >= svg - 1  # the box scrolls sideways instead
    # the leaderboard: a viewport meta and the board in its own scrolling box
    browser.open(pages["leaderboard"], 390)
    assert browser.evaluate("document.querySelector('meta[name=viewport]') !== null")
    board = json.loads(browser.evaluate("""JSON.stringify((() => { const b = document.querySelector('table.board')
        .parentElement; return [b.clientWidth, b.scrollWidth]; })())"""))
    assert board[0] <= 390 < board[1]


def test_leaderboard_headers_break_only_between_words(pages, browser):
    """No header is broken inside an identifier: each KPI/criterion header is one line of its whole key."""
    browser.open(pages["leaderboard"], 1280)
    heads = json.loads(browser.evaluate("""JSON.stringify([...document.querySelectorAll('table.board th[title]')]
        .filter(h => /^[a-z_0-9]+$/.test(h.title)).map(h => { const r = document.createRange();
        r.selectNodeContents(h); return [h.title, h.textContent, r.getClientRects().length]; }))"""))
    assert len(heads) == 6 + 16
    broken = [text for key, text, lines in heads if "_" in text and lines != 1]
    assert broken == []
    assert "r_blur" in [text for _, text, _ in heads]


def test_the_leaderboard_reads_top_to_bottom(pages):
    """Rank chart above the matrices, '-' for what was not measured, a legend covering every value, the
    footer last, and a terminal table that cuts no column name."""
    import pandas as pd

    from challenge_welding.contract.names import SCORE_KEYS
    from challenge_welding.flows.leaderboard import text_table

    html = pages["leaderboard"].read_text(encoding="utf-8")
    chart, first_matrix = html.index('aria-label="rank intervals"'), html.index('<table class="pairs">')
    assert html.index("Which differences are real") < chart < first_matrix
    for name in ("a-team_with_a_long_name", "r_blur_fan", "no_trust"):
        assert f'id="rank-{name}"' in html  # one whisker per ranked submission
    assert html.rstrip().endswith("</p>\n</body></html>") and "Generated by" in html[html.rindex("</table>"):]
    time_col = list(SCORE_KEYS).index("time_p95")
    for row in html.split('<tr class="reference">')[1:]:  # virtual rows: their time was never measured
        cells = row.split("</tr>")[0].split('<td style="background: ')[1:]
        assert cells[time_col].split(">", 1)[1].startswith("-</td>")
    for row in html.split('<tr class="submission">')[1:]:
        cells = row.split("</tr>")[0].split('<td style="background: ')[1:]
        assert re.match(r"\d+\.\d</td>", cells[time_col].split(">", 1)[1])
    assert 'class="k na">-</td><td>not measured' in html
    # the virtual no_trust row's UOP is below 0 here: the uop scale's words cover it
    csv = pd.read_csv(pages["leaderboard"].with_suffix(".csv"))
    assert csv["uop"].min() < 0
    assert "<td class=\"k\">uop</td>" in html and "red at 0 or less, green at 1 or more" in html
    frame = csv.astype({"rank": "Int64", "rank_lo": "Int64", "rank_hi": "Int64"})
    head = text_table(frame).splitlines()[0].split()
    assert {"generalization", "uncertainty", "robustness"} <= set(head)
    assert "docs/" not in html
