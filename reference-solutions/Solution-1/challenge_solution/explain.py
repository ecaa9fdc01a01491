"""Solution-1's explanation map: where the image holds dark blobs (pores, cracks, burn-through).

The challenge lets predict() return, per image, an intensity map in [0, 1] of the image's
size. Ours is the black-hat response (closing minus image: what is darker than its
surroundings within KERNEL pixels) of a grey thumbnail of about 320x180 (the features'
scale), smoothed a little, divided by its maximum and scaled back to the image's
size. The defect evidence of the features is the same kind of response, so the map
shows what drives the KO probability. About 2-3 ms per 1920x1080 image on one core, most of it writing the full-size map
(benchmarks/solution1.py measures it against the features).
"""

from __future__ import annotations

import cv2
import numpy as np

THUMB = (320, 180)
KERNEL = cv2.getStructuringElement(cv2.MORPH_RECT, (9, 9))


def dark_blob_map(image: np.ndarray) -> np.ndarray:
    """float32 map in [0, 1], shape (h, w) of the RGB ``image``; all zero for a flat image."""
    h, w = image.shape[:2]
    step = max(1, min(h // THUMB[1], w // THUMB[0]))
    # strided green channel, not an INTER_AREA grey thumbnail: several times cheaper, and green carries
    # most of the luminance (0.59 of it) - enough to place a dark blob
    grey = np.ascontiguousarray(image[::step, ::step, 1])
    response = cv2.morphologyEx(grey, cv2.MORPH_BLACKHAT, KERNEL).astype(np.float32)
    response = cv2.GaussianBlur(response, (0, 0), 1.0)
    peak = float(response.max())
    if peak > 0:
        response *= 1.0 / peak
    # linear interpolation of values in [0, 1] stays in [0, 1]: no clip pass over the full-size map
    return cv2.resize(response, (w, h), interpolation=cv2.INTER_LINEAR)
