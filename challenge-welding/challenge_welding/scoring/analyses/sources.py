"""The optional inputs of the analyses, read from disk: defect masks, explanation maps, a baseline run.

Every reader returns None (not an error) when its input is absent: the analyses then say
"no masks", "no maps" or "not available". A present but unreadable file is one
ChallengeError naming it.
"""

from __future__ import annotations

from pathlib import Path

import cv2

from challenge_welding.contract.checked import curves, field, read_json
from challenge_welding.contract.errors import ChallengeError
from challenge_welding.scoring.analyses import localisation
from challenge_welding.contract.explanation_maps import MAP_SCALE, read_explainability

MASKS = "masks"          # DATA/reference_data/masks/<set>/<sample_id>.png (uint8 0/255, KO samples only)


def read_masks(reference_dir, set_name, sample_ids=None, grid=None):
    """{sample_id: mask} of ``reference_dir/masks/<set>/``; None when the folder is absent.

    Without ``grid``: the uint8 masks at the image's size (0 / 255). With ``grid``
    ({sample_id: (h, w)}, the shapes of the explanation maps): only those samples' masks,
    each max-pooled onto its map's grid as the localisation does (localisation.pool_mask)
    and the full-size mask dropped at once: at the full size the KO masks take ~0.8 GB at
    the image's size, a sixteenth of it pooled. ``grid={}`` decodes nothing ({} when the
    folder exists).
    """
    folder = Path(reference_dir) / MASKS / set_name
    if not folder.is_dir():
        return None
    wanted = None if sample_ids is None else {str(s) for s in sample_ids}
    if grid is not None:
        wanted = set(grid) if wanted is None else wanted & set(grid)
    out = {}
    for path in sorted(folder.glob("*.png")):
        if wanted is not None and path.stem not in wanted:
            continue
        mask = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
        if mask is None:
            raise ChallengeError(f"defect mask {path} is not a readable PNG")
        out[path.stem] = mask if grid is None else \
            localisation.pool_mask(mask > 0, grid[path.stem], MAP_SCALE)
    return out


def read_maps(predictions_dir, set_name, sample_ids=None):
    """{sample_id: uint8 map (h//4, w//4)} of ``PRED/<set>.explainability.parquet`` (only
    ``sample_ids``' rows when given); None without the file."""
    try:
        return read_explainability(predictions_dir, set_name, sample_ids)
    except ValueError as exc:
        raise ChallengeError(str(exc)) from None


def read_baseline(folder):
    """details.json of a scored baseline run (e.g. Solution-1's OUT): its "robustness" curves."""
    path = Path(folder) / "details.json"
    if not path.is_file():
        raise ChallengeError(f"--baseline {folder}: no details.json there (pass a folder written by `score`)")
    details = read_json(path, "pass a folder written by `score`")
    return {"name": str(folder), "robustness": curves(field(details, "robustness", dict, path), path)}
