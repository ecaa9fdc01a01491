"""Solution-1's decision layer: numpy only, parameters from one npz file.

- classifier: logistic regression on standardised features (trained with
  scikit-learn by train.py; stored as plain arrays, no pickle);
- calibration: temperature T on the logit, fitted on a validation split;
- OOD score: Mahalanobis distance in a PCA space of the features with a
  robust (MCD) covariance, divided by the 99th percentile on in-domain data
  (in-ODD perturbations included), so that 1 is the in/out boundary;
- hard decisions: UNKNOWN when OOD; KO when p_KO >= t_ko (chosen for the KO
  F1 and the cost); OK when p_KO <= t_ok (a missed KO costs 3000, an UNKNOWN on
  a good weld 20, so OK only when the risk is tiny); UNKNOWN in between;
- probabilities, cost-aware: the KO/OK ratio is sharp (KO whenever p_KO >= t_r,
  a low threshold: a true KO called OK is what hurts), and each answer keeps
  some UNKNOWN mass (u_ok scaled by the risk p_KO / t_ok for OK answers, u_ko
  for KO answers, u_unk for UNKNOWN answers), so that the expected cost of the
  soft output is below that of the hard one where the hard one is risky.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

PARAMS = ("mean", "scale", "coef", "intercept", "temperature", "pca_mean", "pca_components",
          "mcd_location", "mcd_precision", "ood_scale", "t_ko", "t_ok", "t_r", "u_ok", "u_ko", "u_unk")
DECISION = ("t_ko", "t_ok", "t_r", "u_ok", "u_ko", "u_unk")


class Model:
    def __init__(self, params: dict, trust: bool = True):
        missing = [k for k in PARAMS if k not in params]
        if missing:
            raise ValueError(f"model file lacks {missing}")
        self.p = {k: np.asarray(params[k], dtype=np.float64) for k in PARAMS}
        self.trust = trust

    @classmethod
    def load(cls, folder: Path) -> "Model":
        with np.load(folder / "model.npz") as z:
            params = {k: z[k] for k in z.files}
        settings = json.loads((folder / "settings.json").read_text())
        return cls(params, trust=bool(settings.get("trust", True)))

    def save(self, folder: Path) -> None:
        np.savez(folder / "model.npz", **self.p)
        (folder / "settings.json").write_text(json.dumps({"trust": self.trust}) + "\n")

    def logit(self, feats: np.ndarray) -> np.ndarray:
        z = (feats - self.p["mean"]) / self.p["scale"]
        return z @ self.p["coef"] + self.p["intercept"]

    def p_ko(self, feats: np.ndarray) -> np.ndarray:
        t = self.p["temperature"] if self.trust else 1.0
        return 1.0 / (1.0 + np.exp(-np.clip(self.logit(feats) / t, -50, 50)))

    def ood_score(self, feats: np.ndarray) -> np.ndarray:
        z = (feats - self.p["mean"]) / self.p["scale"]
        y = (z - self.p["pca_mean"]) @ self.p["pca_components"].T - self.p["mcd_location"]
        d = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", y, self.p["mcd_precision"], y), 0.0))
        return d / self.p["ood_scale"]

    def decide(self, feats: np.ndarray, **override):
        """(states, probabilities n x 3, OOD scores) for a feature matrix."""
        q = self.p_ko(feats)
        n = len(q)
        if not self.trust:  # plain classifier: argmax, one-hot, no OOD signal
            ko = q >= 0.5
            probs = np.zeros((n, 3))
            probs[ko, 0] = 1.0
            probs[~ko, 1] = 1.0
            return np.where(ko, "KO", "OK").astype(object), probs, np.zeros(n)
        return self.decide_scores(q, self.ood_score(feats), **override)

    def decide_scores(self, q: np.ndarray, ood: np.ndarray, **override):
        """The trust decisions from calibrated p_KO ``q`` and OOD scores (see module doc)."""
        n = len(q)
        d = {k: float(override.get(k, self.p[k])) for k in DECISION}
        states = np.full(n, "UNKNOWN", dtype=object)
        states[q >= d["t_ko"]] = "KO"
        states[q <= d["t_ok"]] = "OK"
        states[ood >= 1.0] = "UNKNOWN"
        r = (q >= d["t_r"]).astype(float)
        u = np.select([states == "OK", states == "KO"],
                      [d["u_ok"] * np.clip(q / d["t_ok"], 0.0, 1.0), np.full(n, d["u_ko"])], d["u_unk"])
        probs = np.stack([(1 - u) * r, (1 - u) * (1 - r), u], axis=1)
        return states, probs, ood
