"""Image perturbations of the evaluation sets (BGR uint8 in, BGR uint8 out).

Robustness ladders stay inside the ODD; ``ood_synthetic`` and ``drift`` go beyond it.
Levels are resolution-aware where the protocol wants it: blur is a Gaussian sigma in
pixels *of a 1080-line image* (so a level looks the same at any resolution), luminance
is an exposure change in stops (signed: negative = darker), rotation is in degrees
(signed, counter-clockwise), translation is the (x, x) shift in pixels at every
resolution (the protocol's fixed 20 px bound).
"""

from __future__ import annotations

import cv2
import numpy as np

ROBUSTNESS = ("blur", "luminance", "rotation", "translation")
OOD_SYNTHETIC_KINDS = ("extreme_blur", "dark", "bright", "colour", "noise_dead_pixels")

# Replicated borders: a rotated or shifted photo must not gain black corners (an
# out-of-ODD artefact of our own making), and reflection would mirror the bead into a
# second, V-shaped weld at 30 degrees (seen on docs/contact_sheet.png).
_BORDER = cv2.BORDER_REPLICATE


def blur(img, level):
    sigma = float(level) * img.shape[0] / 1080.0
    if sigma <= 0:
        return img
    if sigma <= 8:
        return cv2.GaussianBlur(img, (0, 0), sigma, borderType=_BORDER)
    # A wide Gaussian costs O(sigma) per pixel; blurring a downscaled copy (area
    # averaging, itself a low-pass) and scaling back gives the same smooth image at
    # ~1/f^2 of the cost -- the level's meaning (sigma) is kept.
    f = sigma / 4.0
    h, w = img.shape[:2]
    small = cv2.resize(img, (max(1, round(w / f)), max(1, round(h / f))), interpolation=cv2.INTER_AREA)
    small = cv2.GaussianBlur(small, (0, 0), sigma / f * 0.9, borderType=_BORDER)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


def luminance(img, stops):
    lut = np.clip(np.arange(256, dtype=np.float32) * 2.0 ** float(stops) + 0.5, 0, 255)
    return cv2.LUT(img, lut.astype(np.uint8))


def rotation(img, degrees):
    h, w = img.shape[:2]
    m = cv2.getRotationMatrix2D(((w - 1) / 2.0, (h - 1) / 2.0), float(degrees), 1.0)
    return cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=_BORDER)


def translation(img, px):
    h, w = img.shape[:2]
    m = np.float32([[1, 0, px], [0, 1, px]])
    return cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=_BORDER)


ROBUSTNESS_FUNCS = {"blur": blur, "luminance": luminance, "rotation": rotation,
                    "translation": translation}


def robustness(img, perturbation, level):
    """Apply one robustness ladder step; ``none`` is the clean copy."""
    if perturbation == "none":
        return img
    return ROBUSTNESS_FUNCS[perturbation](img, level)


def noise_dead_pixels(img, rng, sigma, dead_fraction):
    """Gaussian sensor noise (sigma in grey levels) plus stuck black/white pixels."""
    out = img.astype(np.float32)
    if sigma > 0:
        out += rng.normal(0.0, sigma, img.shape).astype(np.float32)
    out = np.clip(out, 0, 255).astype(np.uint8)
    if dead_fraction > 0:
        h, w = img.shape[:2]
        n = int(dead_fraction * h * w)
        ys, xs = rng.integers(0, h, n), rng.integers(0, w, n)
        out[ys, xs] = np.where(rng.random(n) < 0.5, 0, 255)[:, None].astype(np.uint8)
    return out


def colour_artefacts(img, rng):
    """Severe colour faults: channel swap, strong cast and posterised banding."""
    out = img[:, :, rng.permutation(3)].astype(np.float32)
    cast = rng.uniform(0.3, 1.8, 3).astype(np.float32)
    out = np.clip(out * cast, 0, 255)
    step = float(rng.choice([48, 64, 85]))
    out = np.floor(out / step) * step
    hsv = cv2.cvtColor(out.astype(np.uint8), cv2.COLOR_BGR2HSV)
    hsv[..., 1] = np.maximum(hsv[..., 1], 170)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)


def ood_synthetic(img, kind, rng, config):
    """A strong perturbation that takes the image out of the ODD; ``config``: the build config's
    ood_synthetic section (data/build_sets.py, OodSynthetic)."""
    if kind == "extreme_blur":
        return blur(img, config.extreme_blur)
    if kind == "dark":
        return luminance(img, -abs(config.abnormal_stops[0]))
    if kind == "bright":
        return luminance(img, abs(config.abnormal_stops[1]))
    if kind == "colour":
        return colour_artefacts(img, rng)
    if kind == "noise_dead_pixels":
        return noise_dead_pixels(img, rng, config.noise_sigma, config.dead_fraction)
    raise ValueError(f"unknown OOD kind {kind!r}")


def drift(img, intensity, rng, config):
    """Drift step at ``intensity`` in [0, 1]: noise, dead pixels and darkening grow together;
    ``config``: the build config's drift section (data/build_sets.py, Drift)."""
    out = luminance(img, -config.max_darkening_stops * intensity)
    return noise_dead_pixels(out, rng, config.max_noise_sigma * intensity,
                             config.max_dead_fraction * intensity)
