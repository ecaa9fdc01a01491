"""Drift in time: how long a drift goes unnoticed, and how often the alarm rings before it.

The drift set is a sequence (column ``position``) whose OOD-labelled part begins at the
onset. The onset is the first position labelled OOD, rounded down to a block of
``block`` samples (disclosure: the exact first OOD position would tell single labels;
a block of ``min_samples`` is what the published drift bins already show). The part
before the onset fixes the alarm threshold at a false-alarm rate ``far``: ``tau`` is
the ``1 - far`` quantile (numpy "higher") of the OOD scores before the onset, and a sample
raises an alarm when ``s > tau`` (so at most ``far`` of the samples before ring).

* detection delay = (first position >= onset with s > tau) - onset, in samples
  (0: the first sample after the onset already rings);
* false alarms before onset = #{position < onset: s > tau} (and their share).

Undefined: no OOD-labelled sample (no onset), or fewer than ``block`` samples before the
onset (no threshold) -> None and the reason; no alarm after the onset -> delay None
("not detected before the end of the sequence").
"""

from __future__ import annotations

import numpy as np


def drift_delay(scores, ood, far=0.05, block=1):
    """Threshold, onset, detection delay and false alarms of a sequence in order.

    Examples
    --------
    >>> s = np.array([0.1, 0.2, 0.3, 0.1, 0.2, 0.25, 0.9, 0.8])
    >>> d = drift_delay(s, np.array([0, 0, 0, 0, 0, 0, 1, 1]), far=0.2, block=1)
    >>> d["threshold"], d["onset"], d["delay"], d["false_alarms"]
    (0.25, 6, 0, 1)
    """
    s = np.asarray(scores, dtype=float)
    ood = np.asarray(ood).astype(bool)
    out = {"n": int(len(s)), "far": float(far), "onset": None, "threshold": None, "delay": None,
           "false_alarms": None, "false_alarm_share": None, "n_before": None, "undefined": None}
    if not ood.any():
        out["undefined"] = "no OOD-labelled sample: no onset"
        return out
    first = int(np.argmax(ood))
    onset = (first // block) * block
    out.update(onset=onset, n_before=onset)
    if onset < max(block, 1):
        out["undefined"] = f"fewer than {max(block, 1)} samples before the onset: no threshold"
        return out
    before = s[:onset]
    tau = float(np.quantile(before, 1 - far, method="higher"))
    alarms = int(np.count_nonzero(before > tau))
    after = np.flatnonzero(s[onset:] > tau)
    out.update(threshold=tau, false_alarms=alarms, false_alarm_share=alarms / onset,
               delay=int(after[0]) if len(after) else None)
    if not len(after):
        out["undefined"] = "no alarm after the onset: not detected before the end of the sequence"
    return out
