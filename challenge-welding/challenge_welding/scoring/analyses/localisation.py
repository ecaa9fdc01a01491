"""Does the explanation look at the defect: pointing game and energy-based pointing game.

Maps come at a quarter of the image's resolution (ingestion: ``MAP_SCALE`` = 4, shape
(h // 4, w // 4), at least 1, uint8 0..255); defect masks at the image's full size
(0 / 255, KO samples only). The mask is brought to the map's grid by max-pooling over
MAP_SCALE x MAP_SCALE blocks (the last row and column of blocks take the remainder): a
coarse cell counts as defect when any of its pixels does. Max, not mean or
subsampling, because a map at a quarter resolution cannot place its peak more finely
than one block, and a thin defect (a crack one or two pixels wide) would vanish from a
mean-pooled or subsampled mask, making a perfect pointer miss.

Per sample (Zhang et al. 2018; Wang et al. 2020 "Score-CAM" for the energy variant):

* pointing game hit = share of the map's maximal cells that lie in the pooled mask
  (1 or 0 for a unique maximum; ties share the credit, so a flat map scores the mask's
  area share, not 1);
* energy share = sum(map * mask) / sum(map): the share of the map's mass on the defect.

Undefined: a map with no mass (all zero) -> energy share 0, recorded; an empty mask ->
the sample is left out, recorded. Set values are means over samples, with a bootstrap
interval (scoring.bootstrap.Resampler over the samples).
"""

from __future__ import annotations

import numpy as np

from challenge_welding.scoring.bootstrap import Resampler


def pool_mask(mask, shape, scale):
    """The full-size boolean ``mask`` max-pooled onto a map grid of ``shape`` (blocks of ``scale``).

    Examples
    --------
    >>> m = np.zeros((9, 8), bool); m[8, 0] = True
    >>> pool_mask(m, (2, 2), 4).astype(int).tolist()
    [[0, 0], [1, 0]]
    """
    mask = np.asarray(mask).astype(bool)
    h, w = shape
    rows = np.minimum(np.arange(h) * scale, max(mask.shape[0] - 1, 0))
    cols = np.minimum(np.arange(w) * scale, max(mask.shape[1] - 1, 0))
    pooled = np.maximum.reduceat(mask, rows, axis=0) if mask.shape[0] else np.zeros((h, mask.shape[1]), bool)
    return np.maximum.reduceat(pooled, cols, axis=1) if mask.shape[1] else np.zeros((h, w), bool)


def sample_scores(saliency, pooled):
    """(pointing-game hit, energy share, mass) of one map against its pooled mask.

    Examples
    --------
    >>> m = np.array([[0, 3], [1, 3]], float); k = np.array([[0, 1], [0, 0]], bool)
    >>> sample_scores(m, k)
    (0.5, 0.42857142857142855, 7.0)
    """
    s = np.asarray(saliency, dtype=float)
    top = s == s.max()
    hit = float(np.count_nonzero(top & pooled) / np.count_nonzero(top))
    mass = float(s.sum())
    energy = float(s[pooled].sum() / mass) if mass > 0 else 0.0
    return hit, energy, mass


def localisation(maps, masks, scale, n_boot=0, seed=0, level=0.95, name="localisation"):
    """Pointing game and energy share over the samples having both a map and a non-empty mask.

    ``maps``: {sample_id: 2-D array}; ``masks``: {sample_id: full-size 2-D array, or one
    already pooled onto its map's grid (same shape as the map) (nonzero =
    defect)}. Returns {"n", "pointing_game", "energy", "pointing_game_ci", "energy_ci",
    "undefined": [sentences]}; values None when no sample qualifies.

    Examples
    --------
    >>> maps = {"a": np.array([[0, 9], [0, 0]]), "b": np.array([[9, 0], [0, 1]])}
    >>> masks = {"a": np.array([[0, 0, 1, 1]] * 2 + [[0] * 4] * 2), "b": np.eye(4)[::-1]}
    >>> r = localisation(maps, masks, 2)
    >>> r["n"], r["pointing_game"], round(r["energy"], 4)
    (2, 0.5, 0.5)
    """
    hits, energies, notes = [], [], []
    empty_mask = no_mass = 0
    for sid in sorted(set(maps) & set(masks)):
        saliency = np.asarray(maps[sid])
        mask = np.asarray(masks[sid])
        # a mask already pooled onto the map's grid (sources.read_masks with grid) is used as is
        pooled = mask > 0 if mask.shape == saliency.shape else pool_mask(mask > 0, saliency.shape, scale)
        if not pooled.any():
            empty_mask += 1
            continue
        hit, energy, mass = sample_scores(saliency, pooled)
        no_mass += mass <= 0
        hits.append(hit)
        energies.append(energy)
    if empty_mask:
        notes.append(f"{empty_mask} KO sample(s) with an empty defect mask: left out")
    if no_mass:
        notes.append(f"{no_mass} map(s) with no mass (all zero): energy share 0")
    out = {"n": len(hits), "pointing_game": None, "energy": None, "pointing_game_ci": None, "energy_ci": None,
           "undefined": notes}
    if not hits:
        return out
    values = np.array([hits, energies])
    out["pointing_game"], out["energy"] = (float(v) for v in values.mean(axis=1))
    if n_boot:
        n = values.shape[1]
        weights = Resampler(np.zeros(n, dtype=np.int64), seed, name).counts(np.arange(n), n, n_boot)  # (B, n)
        means = weights @ values.T / n  # (B, 2)
        q = [50 * (1 - level), 50 * (1 + level)]
        out["pointing_game_ci"], out["energy_ci"] = ([float(x) for x in np.percentile(means[:, j], q)]
                                                     for j in range(2))
    return out
