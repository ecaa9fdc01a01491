"""Solution-1's decision layer: numpy only, parameters from one npz file.

- classifier: logistic regression on standardised features (trained with
  scikit-learn by train.py; stored as plain arrays, no pickle);
- calibration: the prior shift of the class-balanced training undone (bias
  -log(n_OK / n_KO)), then a temperature T, fitted on out-of-fold logits;
- OOD score: the larger of two distances, each divided by its in-domain
  boundary (in-ODD perturbations included) so that 1 is the in/out boundary:
  the Mahalanobis distance inside a 12-D PCA of the features with a robust
  (MCD) covariance (boundary: the 99th percentile), and the distance off that
  PCA subspace (boundary: the farthest in-domain view), a guard for frames the
  12 components cannot describe at all, such as a black one when the bead
  features dominate the components;
- hard decisions: UNKNOWN when OOD; KO when p_KO >= t_ko (chosen for the KO
  F1 and the cost); OK when p_KO <= t_ok (a missed KO costs 3000, an UNKNOWN on
  a good weld 20, so OK only when the risk is tiny); UNKNOWN in between;
- probabilities, cost-aware. With a calibrated p_KO = q the expected cost of
  each pure answer is known, and the soft output puts its mass on the cheapest:
  sharp (no UNKNOWN mass) where the hard answer is already the cheapest (OK
  with q <= q_ok, KO with q >= q_ko, the break-even points of the cost matrix),
  almost all on UNKNOWN (1 - eps) everywhere else. Its soft cost is thus lower
  than the hard answer's exactly where the hard thresholds, chosen for OP and
  F1, accept a risk the costs alone would not. The KO/OK ratio r is sharp, KO
  when q >= t_r: the class-wise ECE weighs a KO 0.8 / n_KO and an OK
  0.2 / n_OK, so r = 1 pays as soon as q / (1 - q) > 0.25 n_KO / n_OK.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

PARAMS = ("mean", "scale", "coef", "intercept", "bias", "temperature", "pca_mean", "pca_components",
          "mcd_location", "mcd_precision", "ood_scale", "resid_scale", "t_ko", "t_ok", "t_r", "q_ok", "q_ko", "eps")
DECISION = ("t_ko", "t_ok", "t_r", "q_ok", "q_ko", "eps")


def soft_thresholds(cost: np.ndarray, n_ko: int, n_ok: int, ece_weights=(0.8, 0.2)) -> dict:
    """Break-even points of the soft outputs.

    ``cost`` is 2 x 3: rows true KO, true OK; columns KO, OK, UNKNOWN. With p_KO = q,
    answering OK costs q c[KO,OK] + (1-q) c[OK,OK] on average, UNKNOWN q c[KO,UNK] +
    (1-q) c[OK,UNK]; they are equal at q_ok = (c[OK,UNK] - c[OK,OK]) /
    ((c[KO,OK] - c[KO,UNK]) + (c[OK,UNK] - c[OK,OK])), and UNKNOWN and KO at q_ko likewise.
    t_r: the ratio KO/OK is worth setting to KO when a KO's weight in the class-wise ECE
    (w_KO / n_KO) times q exceeds an OK's (w_OK / n_OK) times (1 - q).
    """
    (ko_ko, ko_ok, ko_unk), (ok_ko, ok_ok, ok_unk) = np.asarray(cost, dtype=np.float64)
    odds = (ece_weights[1] / max(n_ok, 1)) / (ece_weights[0] / max(n_ko, 1))
    return {"q_ok": (ok_unk - ok_ok) / ((ko_ok - ko_unk) + (ok_unk - ok_ok)),
            "q_ko": (ok_ko - ok_unk) / ((ok_ko - ok_unk) + (ko_unk - ko_ko)),
            "t_r": odds / (1 + odds)}


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
        """Calibrated P(KO); without trust, the raw classifier's (class-balanced) probability."""
        z = (self.logit(feats) + self.p["bias"]) / self.p["temperature"] if self.trust else self.logit(feats)
        return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))

    def ood_score(self, feats: np.ndarray) -> np.ndarray:
        z = (feats - self.p["mean"]) / self.p["scale"]
        c = z - self.p["pca_mean"]
        proj = c @ self.p["pca_components"].T
        y = proj - self.p["mcd_location"]
        d = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", y, self.p["mcd_precision"], y), 0.0))
        # the components are orthonormal: the squared distance off the subspace is |c|^2 - |proj|^2
        resid = np.sqrt(np.maximum((c * c).sum(axis=1) - (proj * proj).sum(axis=1), 0.0))
        return np.maximum(d / self.p["ood_scale"], resid / self.p["resid_scale"])

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
        sharp = ((states == "OK") & (q <= d["q_ok"])) | ((states == "KO") & (q >= d["q_ko"]))
        u = np.where(sharp, 0.0, 1.0 - d["eps"])
        probs = np.stack([(1 - u) * r, (1 - u) * (1 - r), u], axis=1)
        return states, probs, ood
