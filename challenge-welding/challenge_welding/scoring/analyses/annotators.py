"""The KPIs on expert-labelled samples only: would the ranking change if only experts' labels counted?

The source data's ``labelling_type`` says who labelled a sample ("expert" or "operator"
in the challenge's data). ``expert_frames`` keeps, in every set whose reference carries
the column, the rows labelled "expert"; sets without it are kept whole (said in
``unlabelled_sets``). The KPIs and the score are then the score's own code
(scoring.criteria) on those frames. Undefined: no set carries the column -> not
available; a subset below ``min_samples`` samples -> not reported (disclosure).
"""

from __future__ import annotations

import numpy as np

from challenge_welding.scoring.criteria import compute, prepare

EXPERT = "expert"


def expert_frames(frames, labelling):
    """(frames restricted to expert rows, {set: n kept}, [sets without labelling]).

    ``labelling``: {set: {sample_id: labelling_type}} for the sets that carry it.

    Examples
    --------
    >>> import pandas as pd
    >>> f = {"a": pd.DataFrame({"sample_id": ["1", "2", "3"]}), "b": pd.DataFrame({"sample_id": ["4"]})}
    >>> kept, n, missing = expert_frames(f, {"a": {"1": "expert", "2": "operator", "3": "expert"}})
    >>> n, missing
    ({'a': 2, 'b': 1}, ['b'])
    """
    out, counts, missing = {}, {}, []
    for name, frame in frames.items():
        types = labelling.get(name)
        if types is None:
            out[name] = frame
            missing.append(name)
        else:
            keep = np.array([types.get(str(s)) == EXPERT for s in frame["sample_id"]], dtype=bool)
            out[name] = frame[keep].reset_index(drop=True)
        counts[name] = int(len(out[name]))
    return out, counts, missing


def expert_kpis(frames, labelling, config, min_samples):
    """{"available", "n", "unlabelled_sets", "score", "kpis", "reason"} on expert-labelled rows."""
    if not labelling:
        return {"available": False, "reason": "no reference set carries labelling_type", "score": None,
                "kpis": {}, "n": {}, "unlabelled_sets": sorted(frames)}
    kept, counts, missing = expert_frames(frames, labelling)
    small = [s for s, n in counts.items() if n < min_samples]
    if small:
        return {"available": False, "reason": f"fewer than {min_samples} expert-labelled samples in "
                f"{', '.join(small)}: not reported", "score": None, "kpis": {}, "n": counts,
                "unlabelled_sets": missing}
    with np.errstate(all="ignore"):
        res = compute(prepare(kept, config), config)
    return {"available": True, "reason": None, "score": float(res["score"]),
            "kpis": {k: float(v) for k, v in res["rescaled"].items()}, "n": counts, "unlabelled_sets": missing}
