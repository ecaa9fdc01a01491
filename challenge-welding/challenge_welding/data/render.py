"""Procedural drawing of one weld photo (numpy + cv2, vectorised over the pixel grid).

Geometry is expressed in units of the image height so that a weld looks the same at
1920x1080, 960x540 or 480x270. Every random draw comes from the ``rng`` passed in, so
an image depends only on its own seed (never on worker scheduling).

No library draws weld beads, so this is hand-written: a bead is a height field
(half-ellipse profile across the seam) with chevron ripples, shaded by a fixed light,
laid on textured plates with a heat-affected zone; defects edit the height field,
the bead mask or the colours.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

DEFECTS = ("porosity", "crack", "undercut", "spatter", "burn_through", "missing_segment")
REAL_OOD_KINDS = ("occlusion", "glare", "dark", "bright", "motion_blur")
# The scene is drawn at most this many lines high and upscaled (see render_weld_and_mask):
# every feature is >= 1 px here (ripples ~8 px, pores >= 1.4 px, cracks >= 1 px).
SCENE_LINES = 270


@dataclass(frozen=True)
class SeamLook:
    angle: float          # bead direction, degrees (0 = horizontal)
    width: float          # bead half-width, fraction of image height
    ripple: float         # ripple period, fraction of image height
    chevron: float        # how much ripples bend backwards at the bead edges
    plate: tuple          # plate BGR colour
    bead: tuple           # bead BGR colour
    haz: tuple            # heat tint BGR colour
    background: tuple     # fixture/background BGR colour
    texture: str          # "brushed" | "grainy" | "mottled"
    gain: float           # overall exposure
    curvature: float      # bead wobble amplitude, fraction of height


# Each seam has its own look; the unseen seams share traits with in-domain ones
# (c19 ~ c102, c34 ~ c20/c33, c101 ~ c102 with another angle) as the protocol says.
SEAM_LOOKS = {
    "c102": SeamLook(0, 0.085, 0.030, 0.9, (168, 170, 172), (150, 158, 166), (140, 105, 80),
                     (52, 48, 45), "brushed", 1.00, 0.010),
    "c20": SeamLook(35, 0.060, 0.045, 1.4, (118, 124, 128), (110, 130, 150), (70, 110, 150),
                    (30, 34, 40), "grainy", 1.05, 0.015),
    "c33": SeamLook(78, 0.115, 0.038, 0.7, (95, 120, 150), (120, 140, 165), (60, 80, 120),
                    (38, 40, 34), "mottled", 0.90, 0.008),
    "c19": SeamLook(12, 0.080, 0.028, 1.0, (150, 160, 165), (140, 150, 165), (130, 100, 90),
                    (45, 45, 50), "brushed", 0.95, 0.012),
    "c34": SeamLook(52, 0.095, 0.040, 1.1, (110, 125, 140), (115, 135, 160), (70, 95, 135),
                    (34, 38, 38), "grainy", 0.95, 0.012),
    "c101": SeamLook(-22, 0.070, 0.032, 0.9, (160, 165, 168), (145, 155, 165), (135, 110, 85),
                     (50, 46, 44), "mottled", 1.05, 0.010),
}


def _gauss(rng, shape, sigma=1.0):
    """float32 Gaussian noise. cv2.randn is ~5x faster than numpy's generator; it is
    reseeded from ``rng`` each call, so the image still depends only on its own seed."""
    out = np.empty(shape, np.float32)
    cv2.setRNGSeed(int(rng.integers(1, 2**31 - 1)))
    cv2.randn(out, 0.0, float(sigma))
    return out


def _blend(img, target, alpha):
    """In place: img = img * (1 - alpha) + target * alpha (two passes instead of four)."""
    img += (target - img) * alpha[..., None]
    return img


def _smooth_noise(rng, h, w, cells):
    """Low-frequency noise in [-1, 1]-ish: a small random grid upsampled bicubically."""
    cy = max(2, int(cells))
    cx = max(2, int(cells * w / h))
    small = rng.standard_normal((cy, cx), dtype=np.float32)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def _plate_texture(rng, h, w, kind):
    grain = _gauss(rng, (h, w))
    scale = h / 270.0
    if kind == "brushed":
        k = max(3, int(25 * scale)) | 1
        streaks = cv2.blur(grain, (k, 1)) * np.sqrt(k) * 0.5
        tex = 0.05 * streaks + 0.035 * grain + 0.08 * _smooth_noise(rng, h, w, 4)
    elif kind == "grainy":
        spots = cv2.GaussianBlur(grain, (0, 0), 1.2 * scale) * 2.0
        tex = 0.06 * spots + 0.04 * grain + 0.07 * _smooth_noise(rng, h, w, 6)
    else:  # mottled
        tex = 0.10 * _smooth_noise(rng, h, w, 12) + 0.06 * _smooth_noise(rng, h, w, 3) + 0.035 * grain
    return tex


def _disks(shape, centres, radii, soft):
    """Max over soft disks (u, v in height units) -> coverage map in [0, 1]."""
    h, w = shape
    out = np.zeros(shape, np.float32)
    for (cu, cv_), r in zip(centres, radii):
        # Work on the bounding box only: cheap even with dozens of spatter droplets.
        px, py, pr = cu * h + w / 2, cv_ * h + h / 2, (r + 2 * soft) * h + 2
        x0, x1 = int(max(0, px - pr)), int(min(w, px + pr + 1))
        y0, y1 = int(max(0, py - pr)), int(min(h, py + pr + 1))
        if x0 >= x1 or y0 >= y1:
            continue
        yy, xx = np.mgrid[y0:y1, x0:x1].astype(np.float32)
        dist = np.hypot((xx - w / 2) / h - cu, (yy - h / 2) / h - cv_)
        cov = np.clip((r - dist) / max(soft, 1e-4) + 0.5, 0, 1)
        np.maximum(out[y0:y1, x0:x1], cov, out=out[y0:y1, x0:x1])
    return out


def render_weld(rng, seam, width, height, defects=(), ood_kind=None, ok_spatter=True):
    """Draw one weld photo: a BGR uint8 array (height, width, 3). See render_weld_and_mask."""
    return render_weld_and_mask(rng, seam, width, height, defects, ood_kind, ok_spatter)[0]


def render_weld_and_mask(rng, seam, width, height, defects=(), ood_kind=None, ok_spatter=True):
    """Draw one weld photo and its defect mask.

    rng: numpy Generator (the only randomness); seam: a key of SEAM_LOOKS;
    defects: sequence of (name, severity in (0, 1]); ood_kind: None or one of
    REAL_OOD_KINDS. Returns (BGR uint8 (height, width, 3), mask) where mask is a bool
    (height, width) array of the defects' pixels (all False without defects).

    Speed: the scene (plates, bead, defects, light) is drawn at most SCENE_LINES high and
    upscaled; the camera's defocus and sensor noise are applied at the full resolution
    (see _camera). Every random draw is the same at any resolution (geometry is in
    height units, array shapes never change the number of draws), so a seed shows the
    same weld at 480x270 and 1920x1080; at <= SCENE_LINES lines nothing is upscaled.
    """
    h, w = int(height), int(width)
    hs = min(h, SCENE_LINES)
    ws = w if hs == h else max(1, int(round(w * hs / h)))
    img, mask = _scene(rng, seam, ws, hs, defects, ood_kind, ok_spatter)
    img = _camera(rng, img, w, h)
    if mask is not None and (ws, hs) != (w, h):
        mask = cv2.resize(mask, (w, h), interpolation=cv2.INTER_LINEAR)
    mask = mask >= 0.5 if mask is not None else np.zeros((h, w), bool)
    return img, mask


# over 60 lines on purpose: the order of the random draws must read top to bottom (a seed
# shows the same weld at every size)
def _scene(rng, seam, w, h, defects, ood_kind, ok_spatter):
    """The weld as seen through a perfect lens (float32 BGR, w x h) and the defects'
    coverage (float32 in [0, 1], or None without defects). Hand-written drawing: see the
    module docstring; one function so the order of the random draws reads top to bottom."""
    look = SEAM_LOOKS[seam]
    px = 1.0 / h  # one pixel in height units
    # Broadcast row/column coordinates: full (h, w) arrays appear only where needed.
    u = ((np.arange(w, dtype=np.float32) - w / 2) / h)[None, :]
    v = ((np.arange(h, dtype=np.float32) - h / 2) / h)[:, None]

    a = np.deg2rad(look.angle + rng.uniform(-4, 4))
    # Python floats, not numpy float64 scalars: those would promote every float32 array.
    ca, sa = float(np.cos(a)), float(np.sin(a))
    offset = rng.uniform(-0.08, 0.08)
    t = u * ca + v * sa                      # along the bead
    phase0 = rng.uniform(0, 2 * np.pi)
    wobble = look.curvature * np.sin(2 * np.pi * t / 0.9 + phase0)
    d = -u * sa + v * ca - offset - wobble   # across the bead
    w0 = look.width * rng.uniform(0.9, 1.1)
    width_var = 1 + 0.07 * np.sin(2 * np.pi * t / 0.37 + rng.uniform(0, 6)) \
        + 0.04 * np.sin(2 * np.pi * t / 0.13 + rng.uniform(0, 6))
    hw = w0 * width_var
    r = d / hw

    # Plates, joint line, heat-affected zone, fixture in one corner.
    plate = np.asarray(look.plate, np.float32) * rng.uniform(0.92, 1.08, 3).astype(np.float32)
    tex = _plate_texture(rng, h, w, look.texture)
    side = np.where(d > 0, 1.0, rng.uniform(0.86, 0.96)).astype(np.float32)
    img = plate[None, None, :] * ((1 + tex) * side)[..., None]
    joint = np.exp(-(d / (1.2 * px)) ** 2) * 0.5
    img *= (1 - joint)[..., None]
    haz = np.exp(-np.maximum(np.abs(r) - 1, 0) * hw / (w0 * rng.uniform(0.8, 1.6)))
    haz = (haz * 0.55 * (1 + 0.3 * _smooth_noise(rng, h, w, 8))).astype(np.float32)
    _blend(img, np.asarray(look.haz, np.float32) * (1 + tex[..., None]), haz)
    if rng.uniform() < 0.7:
        b = rng.uniform(0, 2 * np.pi)
        edge = u * float(np.cos(b)) + v * float(np.sin(b))
        cut = rng.uniform(0.45, 0.85)
        bg = np.clip((edge - cut) / (2 * px), 0, 1)
        bgcol = np.asarray(look.background, np.float32) * (1 + 0.15 * _smooth_noise(rng, h, w, 5))[..., None]
        _blend(img, bgcol, bg)

    # Bead presence (missing segments remove it), height profile and ripples.
    present = (np.abs(r) < 1).astype(np.float32)
    present = cv2.GaussianBlur(present, (0, 0), 0.8)
    gaps = np.zeros((h, w), np.float32)
    # the defects' coverage (the mask): what each defect draws, at coverage >= 0.5
    defect_cov = np.zeros((h, w), np.float32) if defects else None
    for name, sev in defects:
        if name == "missing_segment":
            tc = rng.uniform(-0.3, 0.3)
            half = w0 * (0.4 + 2.2 * sev)
            end = np.clip((half - np.abs(t - tc)) / (w0 * 0.25), 0, 1)
            gaps = np.maximum(gaps, end)
    if defects:
        np.maximum(defect_cov, gaps * (np.abs(r) < 1), out=defect_cov)  # where the bead is missing
    present *= 1 - gaps
    height_map = np.sqrt(np.clip(1 - r * r, 0, 1)) * present
    period = look.ripple * rng.uniform(0.85, 1.15)
    ripple_phase = 2 * np.pi * (t + look.chevron * (r * r) * w0) / period
    ripple = np.cos(ripple_phase) * (0.55 + 0.45 * np.cos(ripple_phase * 0.5 + 1.0))
    shade = 0.50 + 0.50 * height_map - 0.30 * r * height_map
    spec = np.exp(-((r + 0.35) / 0.18) ** 2) * (0.5 + 0.5 * np.maximum(ripple, 0)) * present
    toe = np.exp(-((np.abs(r) - 0.97) / 0.07) ** 2) * present
    bead_col = np.asarray(look.bead, np.float32) * rng.uniform(0.9, 1.1)
    bead = bead_col * (shade * (1 + 0.22 * ripple) * (1 - 0.45 * toe))[..., None] \
        + (110 * spec)[..., None]
    _blend(img, bead, present)

    def darken(cov, strength, tint=(0, 0, 0)):
        _blend(img, np.asarray(tint, np.float32), cov * strength)

    def to_uv(tt, dd):
        wob = look.curvature * np.sin(2 * np.pi * tt / 0.9 + phase0)
        dd = dd + offset + wob
        return tt * ca - dd * sa, tt * sa + dd * ca

    # Light spatter exists on good welds too, so spatter alone is not a giveaway.
    spatter_n = int(rng.integers(0, 6)) if ok_spatter else 0
    spatter_sev = 0.0
    for name, sev in defects:
        tc = rng.uniform(-0.3, 0.3)
        if name == "porosity":
            n = 1 + int(round(sev * 7))
            tt = tc + rng.uniform(-0.12, 0.12, n)
            dd = rng.uniform(-0.55, 0.55, n) * w0
            rad = w0 * rng.uniform(0.06, 0.12 + 0.22 * sev, n)
            cov = _disks((h, w), list(zip(*to_uv(tt, dd))), rad, 0.8 * px)
            rim = _disks((h, w), list(zip(*to_uv(tt - 0.25 * rad, dd - 0.25 * rad))), rad * 1.15, 0.8 * px)
            img += (40 * np.clip(rim - cov, 0, 1))[..., None]
            darken(cov, 0.55 + 0.35 * sev, (20, 20, 22))
            np.maximum(defect_cov, cov, out=defect_cov)
        elif name == "crack":
            length = 0.08 + 0.45 * sev
            n = 24
            tt = tc + np.linspace(-length / 2, length / 2, n)
            dd = np.cumsum(rng.normal(0, 0.08 * w0, n)) * 0.6
            dd = np.clip(dd - dd.mean() + rng.uniform(-0.3, 0.3) * w0, -0.8 * w0, 0.8 * w0)
            uu, vv = to_uv(tt, dd)
            pts = np.stack([uu * h + w / 2, vv * h + h / 2], 1).astype(np.int32)
            mask = np.zeros((h, w), np.uint8)
            thick = max(1, int(round((1.0 + 1.5 * sev) * h / 540)))
            cv2.polylines(mask, [pts], False, 255, thick, cv2.LINE_AA)
            line = mask.astype(np.float32) / 255
            darken(line, 0.6 + 0.35 * sev, (15, 15, 18))
            np.maximum(defect_cov, line, out=defect_cov)
        elif name == "undercut":
            length = 0.1 + 0.4 * sev
            sgn = float(rng.choice([-1.0, 1.0]))
            along = np.clip((length / 2 - np.abs(t - tc)) / 0.02, 0, 1)
            across = np.exp(-(((r * sgn) - 1.12) / (0.10 + 0.12 * sev)) ** 2)
            groove = along * across
            darken(groove, 0.35 + 0.5 * sev, (25, 22, 20))
            np.maximum(defect_cov, groove, out=defect_cov)
        elif name == "spatter":
            spatter_sev = max(spatter_sev, sev)
        elif name == "burn_through":
            dc = rng.uniform(-0.2, 0.2) * w0
            rad = w0 * (0.25 + 0.6 * sev)
            cu, cv_ = to_uv(np.array([tc]), np.array([dc]))
            halo = _disks((h, w), [(cu[0], cv_[0])], [rad * 1.8], rad * 0.6)
            core = _disks((h, w), [(cu[0], cv_[0])], [rad], 1.0 * px)
            darken(halo, 0.55, (30, 60, 110))
            darken(core, 0.92, (8, 8, 10))
            np.maximum(defect_cov, halo, out=defect_cov)  # the heat-tinted halo holds the hole
        elif name == "missing_segment":
            pass  # handled in the bead mask above
    benign_n = spatter_n
    if spatter_sev > 0:
        spatter_n += 8 + int(45 * spatter_sev)
    if spatter_n:
        tt = rng.uniform(-0.9, 0.9, spatter_n)
        dd = rng.normal(0, 1.6, spatter_n) * w0
        dd += np.sign(dd) * w0
        big = 1.0 + 2.5 * spatter_sev
        rad = rng.uniform(0.6, big, spatter_n) * (3.0 / 540)
        centres = list(zip(*to_uv(tt, dd)))
        shadow = _disks((h, w), [(x + rr * 0.5, y + rr * 0.5) for (x, y), rr in zip(centres, rad)],
                        rad, 0.7 * px)
        darken(shadow, 0.5)
        drop = _disks((h, w), centres, rad, 0.7 * px)
        _blend(img, np.asarray(look.bead, np.float32) * 1.2, drop)
        if spatter_sev > 0:  # the defect's droplets, not the few a good weld has too
            extra = _disks((h, w), centres[benign_n:], rad[benign_n:], 0.7 * px)
            np.maximum(defect_cov, extra, out=defect_cov)

    # Lighting: exposure, gradient, vignette.
    gx, gy = (float(x) for x in rng.uniform(-0.35, 0.35, 2))
    light = look.gain * rng.uniform(0.85, 1.15) * (1 + gx * u + gy * v) * (1 - 0.35 * (u * u + v * v))
    img *= light[..., None]

    if ood_kind is not None:
        img = _real_ood(rng, img, ood_kind, u, v, h, w)
    return img, (np.clip(defect_cov, 0, 1) if defects else None)


def _camera(rng, img, w, h):
    """Slight defocus (varies, so blur_level spans the 950 threshold) and sensor noise.

    ``img`` is the scene (float32, possibly fewer lines than h). At full size: as drawn.
    Upscaled: the defocus is applied before upscaling at the scene's scale (a Gaussian
    of sigma s at full size = sigma s * hs / h on the scene, the bilinear upscale adding
    its own sub-pixel smoothing), then uint8, then noise of the same law (N(0, 2.5)
    truncated to integers as astype did: mean -0.5) added at full size in int16.
    """
    hs = img.shape[0]
    sigma = float(rng.choice([0.0, 0.5, 0.8, 1.1, 1.5])) * h / 270
    if hs == h:
        if sigma > 0.2:
            img = cv2.GaussianBlur(img, (0, 0), sigma)
        img += _gauss(rng, img.shape, 2.5)
        return np.clip(img, 0, 255).astype(np.uint8)
    if sigma * hs / h > 0.2:
        img = cv2.GaussianBlur(img, (0, 0), sigma * hs / h)
    small = np.clip(img, 0, 255).astype(np.uint8)
    big = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
    return cv2.add(big, _noise_int16(rng, big.shape), dtype=cv2.CV_8U)


def _noise_int16(rng, shape):
    """round(N(-0.5, 2.5)) as int16: the full-size sensor noise (cv2.randn rounds to
    integers when writing int16, so no float pass over the frame)."""
    out = np.empty(shape, np.int16)
    cv2.setRNGSeed(int(rng.integers(1, 2**31 - 1)))
    cv2.randn(out, -0.5, 2.5)
    return out


def _real_ood(rng, img, kind, u, v, h, w):
    """Conditions under which the weld is not reliably visible (OOD_class = 1)."""
    if kind == "occlusion":
        # A glove, cable or clamp in front of the seam: a large dark rounded shape.
        n = int(rng.integers(2, 5))
        cu = rng.uniform(-0.2, 0.2) + rng.uniform(-0.25, 0.25, n)
        cv_ = rng.uniform(-0.12, 0.12) + rng.uniform(-0.15, 0.15, n)
        cov = _disks((h, w), list(zip(cu, cv_)), rng.uniform(0.15, 0.3, n), 6.0 / h)
        col = np.asarray(rng.choice([[40, 40, 45], [30, 60, 120], [90, 90, 90]]), np.float32)
        shade = 1 + 0.3 * (v - u)
        img = img * (1 - cov[..., None]) + (col * shade[..., None]) * cov[..., None]
    elif kind == "glare":
        cu, cv_ = rng.uniform(-0.3, 0.3), rng.uniform(-0.15, 0.15)
        rr = rng.uniform(0.25, 0.45)
        dist2 = ((u - cu) / (rr * 1.6)) ** 2 + ((v - cv_) / rr) ** 2
        img = img + (600 * np.exp(-dist2 * 1.5))[..., None]
    elif kind == "dark":
        img = img * rng.uniform(0.05, 0.12)
    elif kind == "bright":
        img = img * rng.uniform(3.0, 5.0) + 60
    elif kind == "motion_blur":
        length = int(rng.uniform(0.08, 0.15) * w) | 1
        k = np.zeros((length, length), np.float32)
        k[length // 2, :] = 1.0 / length
        rot = cv2.getRotationMatrix2D((length / 2 - 0.5, length / 2 - 0.5), rng.uniform(0, 180), 1.0)
        k = cv2.warpAffine(k, rot, (length, length))
        img = cv2.filter2D(img, -1, k / max(k.sum(), 1e-6), borderType=cv2.BORDER_REFLECT)
    return img
