"""Contact sheet: one weld per seam (OK and KO) and every perturbation at its bounds.

    python -m challenge_welding.data.contact_sheet --out docs/contact_sheet.png

Lets a person judge the realism of the synthetic welds and the ODD bounds of the
builder config (the last level of each robustness ladder, the OOD perturbations,
the end of the drift sequence, the real-OOD kinds).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from challenge_welding.data import perturbations as pt
from challenge_welding.data.render import DEFECTS, REAL_OOD_KINDS, SEAM_LOOKS, render_weld

TILE = (320, 180)  # rendered at 640x360, shown at half size


def _label(img, text):
    out = cv2.resize(img, TILE, interpolation=cv2.INTER_AREA)
    cv2.rectangle(out, (0, 0), (TILE[0], 18), (0, 0, 0), -1)
    cv2.putText(out, text, (4, 13), cv2.FONT_HERSHEY_SIMPLEX, 0.42, (255, 255, 255), 1, cv2.LINE_AA)
    return out


def build_sheet(config=None, seed=0):
    from challenge_welding.data.build_sets import load_build_config

    cfg = config or load_build_config()
    w, h = 640, 360
    tiles = []
    for i, seam in enumerate(SEAM_LOOKS):
        ok = render_weld(np.random.default_rng([seed, i]), seam, w, h)
        tiles.append(_label(ok, f"{seam} OK"))
        defect = DEFECTS[i % len(DEFECTS)]
        ko = render_weld(np.random.default_rng([seed, i, 1]), seam, w, h, defects=[(defect, 0.7)])
        tiles.append(_label(ko, f"{seam} KO {defect} 0.7"))
    for j, defect in enumerate(DEFECTS):  # graded severity: the subtle end
        img = render_weld(np.random.default_rng([seed, 50, j]), "c102", w, h, defects=[(defect, 0.15)])
        tiles.append(_label(img, f"c102 KO {defect} 0.15"))
    base = render_weld(np.random.default_rng([seed, 99]), "c20", w, h, defects=[("porosity", 0.6)])
    tiles.append(_label(base, "clean (c20 KO porosity)"))
    levels = cfg.robustness.levels
    for name in pt.ROBUSTNESS:
        for level in sorted({min(getattr(levels, name)), max(getattr(levels, name))}):
            tiles.append(_label(pt.robustness(base, name, level), f"{name} {level:g}"))
    rng = np.random.default_rng(seed)
    for kind in cfg.ood_synthetic.kinds:
        tiles.append(_label(pt.ood_synthetic(base, kind, rng, cfg.ood_synthetic),
                            f"ood_synthetic {kind}"))
    tiles.append(_label(pt.drift(base, 1.0, rng, cfg.drift), "drift end"))
    for k, kind in enumerate(REAL_OOD_KINDS):
        img = render_weld(np.random.default_rng([seed, 70, k]), "c33", w, h, ood_kind=kind)
        tiles.append(_label(img, f"real OOD {kind}"))
    cols = 6
    while len(tiles) % cols:
        tiles.append(np.zeros_like(tiles[0]))
    rows = [np.hstack(tiles[r:r + cols]) for r in range(0, len(tiles), cols)]
    return np.vstack(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/contact_sheet.png")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sheet = build_sheet(seed=args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # A 256-colour palette keeps the committed PNG under 1 MB (photos compress badly).
    from PIL import Image

    rgb = Image.fromarray(cv2.cvtColor(sheet, cv2.COLOR_BGR2RGB))
    rgb.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    print(f"{out} ({out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
