"""Train Solution-1 from a training set in the challenge's source format.

    python reference-solutions/Solution-1/train.py --data DATA/training_data --out FOLDER [--no-trust]

FOLDER is a copy of this submission folder (or this folder itself); the model is
written to FOLDER/challenge_solution/model.npz and settings.json. Runs in the
organiser's environment (scikit-learn, pandas); the component itself only needs
numpy and cv2 at inference.

Steps: features of every training image plus in-ODD perturbed copies (rotation
+-30 deg, translation <= 20 px, blur, darker/brighter), the augmentation the
robustness set calls for; a class-balanced logistic regression; 4-fold
out-of-fold logits, on which the balanced weights' prior shift is undone and a
temperature fitted; a robust Mahalanobis OOD score whose unit is the 99th
percentile of in-domain data; and decision thresholds chosen on the out-of-fold
predictions (averaged over bootstrap resamples) by the challenge's cost matrix
(read from the scoring config, never typed here).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import cv2
import numpy as np

HERE = Path(__file__).parent.resolve()
sys.path.insert(0, str(HERE))
from challenge_solution.features import image_features  # noqa: E402 - after HERE joins sys.path
from challenge_solution.model import Model, soft_thresholds  # noqa: E402 - after HERE joins sys.path

N_AUG = 2          # perturbed copies per training image
PCA_DIMS = 12      # OOD space
OOD_QUANTILE = 99.0
N_FOLDS = 4
N_RESAMPLES = 40   # bootstrap resamples over which the decision thresholds are averaged


def perturb(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One random in-ODD perturbation (the robustness set's four kinds)."""
    h, w = img.shape[:2]
    kind = rng.integers(4)
    if kind == 0:
        m = cv2.getRotationMatrix2D((w / 2, h / 2), rng.uniform(-30, 30), 1.0)
        return cv2.warpAffine(img, m, (w, h), borderMode=cv2.BORDER_REFLECT)
    if kind == 1:
        x = rng.uniform(0, 20)
        m = np.float32([[1, 0, x], [0, 1, x]])
        return cv2.warpAffine(img, m, (w, h), borderMode=cv2.BORDER_REFLECT)
    # Blur and exposure span the robustness ladders (sigma up to ~28 px of a 1080-line
    # image, -3 to +1 stops; the top of the +1.5 rung is left out so that a burnt-out
    # white frame stays clearly OOD): the weld must still be judged there, not called OOD.
    if kind == 2:
        return cv2.GaussianBlur(img, (0, 0), rng.uniform(0.5, 7.0) * h / 270)
    gain = 2.0 ** rng.uniform(-3.0, 1.0)
    return np.clip(img.astype(np.float32) * gain, 0, 255).astype(np.uint8)


def _features_of(args):
    path, seed, n_aug = args
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise SystemExit(f"error: cannot read image {path}")
    img = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    rng = np.random.default_rng(seed)
    return [image_features(img)] + [image_features(perturb(img, rng)) for _ in range(n_aug)]


def load_training(data: Path, workers: int):
    import pandas as pd

    # The published layout: DATA is a dataset folder (its metadata inside) or the storage
    # root holding one dataset; image paths are relative to the storage root or the dataset.
    found = [data / "metadata" / "ds_meta.parquet"] + sorted(data.glob("challenge-welding/datasets/*/metadata/ds_meta.parquet"))
    found = [p for p in found if p.exists()]
    if len(found) != 1:
        raise SystemExit(f"error: expected one metadata/ds_meta.parquet in {data} (the published format), found {len(found)}")
    meta_path = found[0]
    roots = [meta_path.parents[1]] + list(meta_path.parents[2:5])
    meta = pd.read_parquet(meta_path)
    if "OOD_class" in meta.columns:  # real OOD rows are not weld classes
        meta = meta[meta["OOD_class"].fillna(0).astype(int) == 0]
    meta = meta.reset_index(drop=True)
    jobs = [(next((r / p for r in roots if (r / p).is_file()), data / p), i, N_AUG) for i, p in enumerate(meta["path"])]
    with ProcessPoolExecutor(workers) as pool:
        feats = list(pool.map(_features_of, jobs, chunksize=16))
    y = (meta["class"].to_numpy() == "KO").astype(int)
    return meta, np.asarray(feats), y  # feats: (n, 1 + N_AUG, d)


def load_cost():
    """Cost matrix and seam weights from the challenge's scoring config."""
    import yaml
    from importlib.resources import files

    cfg = yaml.safe_load(files("challenge_welding.scoring").joinpath("default_scoring.yaml").read_text())
    c = cfg["cost"]
    cost = np.array([[c["KO"]["KO"], c["KO"]["OK"], c["KO"]["UNKNOWN"]],
                     [c["OK"]["KO"], c["OK"]["OK"], c["OK"]["UNKNOWN"]]])
    return cost, cfg["seam_weights"], cfg["default_seam_weight"]


def proxy_objective(y, seams, states, probs, cost, weights, default_w, counts):
    """0.30 * I_perf + 0.15 * I_U on resamples of the out-of-fold set (time left out).

    ``counts`` (B x n) says how often each sample appears in each of B bootstrap
    resamples; every term is returned per resample (arrays of length B). The
    formulas are those of docs/scoring.md: seam-weighted mean costs, OP against
    the human-only process (UNKNOWN everywhere), F1 of KO, UOP, and the
    class-wise ECE approximated by its per-sample form (mean 1 - r on KO, mean
    r on OK).
    """
    col = {"KO": 0, "OK": 1, "UNKNOWN": 2}
    row = 1 - y  # 0 = true KO, 1 = true OK
    idx = np.array([col[s] for s in states])
    w_seam = {s: weights.get(s, default_w) for s in np.unique(seams)}
    masks = [(w_seam[s], seams == s) for s in w_seam]
    per_sample = np.stack([cost[row, idx], (probs * cost[row]).sum(axis=1),
                           cost[row, np.where(y == 1, 0, 1)], cost[row, 2]], axis=1)  # hard, soft, ideal, human
    tot, wsum = 0.0, 0.0
    for w, m in masks:
        n_s = np.maximum(counts[:, m].sum(axis=1), 1e-12)[:, None]
        tot = tot + w * (counts[:, m] @ per_sample[m]) / n_s
        wsum += w
    c_hard, c_soft, c_ideal, c_human = (tot / wsum).T
    op = (c_hard - c_ideal) / (c_human - c_ideal)
    tp = counts @ ((idx == 0) & (y == 1))
    f1 = 2 * tp / np.maximum(counts @ (idx == 0) + counts @ (y == 1), 1)
    gap = c_hard - c_ideal
    tiny = gap <= 1e-9 * (c_human - c_ideal)
    uop = np.where(tiny, 1 - (c_soft - c_ideal) / (c_human - c_ideal), (c_hard - c_soft) / np.where(tiny, 1, gap))
    ko_sum = probs[:, 0] + probs[:, 1]
    r = np.where(ko_sum > 0, probs[:, 0] / np.maximum(ko_sum, 1e-12), 1.0)
    ece = 0.8 * (counts @ ((1 - r) * y)) / np.maximum(counts @ y, 1) \
        + 0.2 * (counts @ (r * (1 - y))) / np.maximum(counts @ (1 - y), 1)
    i_u = np.clip(uop, 0, 1) * np.clip(1 - 2 * ece, 0, 1)
    return 0.30 * (0.4 * np.exp(-op) + 0.6 * f1) + 0.15 * i_u, op, f1, uop


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path, help="training_data folder (source format)")
    ap.add_argument("--out", required=True, type=Path, help="submission folder to write the model into")
    ap.add_argument("--no-trust", action="store_true", help="plain classifier: no calibration, OOD or UNKNOWN")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from scipy.optimize import minimize_scalar
    from sklearn.covariance import MinCovDet
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    t0 = time.perf_counter()
    out = args.out.resolve()
    if out != HERE:  # the target becomes a complete submission folder
        shutil.copytree(HERE, out, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "model.npz", "settings.json"))
    meta, feats, y = load_training(args.data, args.workers)
    seams = meta["welding-seams"].to_numpy().astype(str)
    print(f"features: {feats.shape[0]} images x {feats.shape[1]} views x {feats.shape[2]} "
          f"in {time.perf_counter() - t0:.1f} s; KO {y.sum()}", flush=True)

    # Out-of-fold logits of the clean views (every image judged by a model that did not see
    # it): the temperature and the decision thresholds are chosen on all of them, which is
    # four times steadier than one validation split with a few dozen KO.
    def fit(idx):
        x = feats[idx].reshape(-1, feats.shape[2])
        mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
        model_ = LogisticRegression(C=0.3, class_weight="balanced", max_iter=5000)
        model_.fit((x - mu) / sd, np.repeat(y[idx], feats.shape[1]))
        return mu, sd, model_

    logit_oof = np.zeros(len(y))
    for idx_tr, idx_va in StratifiedKFold(N_FOLDS, shuffle=True, random_state=args.seed).split(feats, y):
        mu, sd, model_ = fit(idx_tr)
        logit_oof[idx_va] = ((feats[idx_va, 0] - mu) / sd) @ model_.coef_[0] + model_.intercept_[0]
    mean, scale, clf = fit(np.arange(len(y)))
    # Balanced class weights multiply the KO odds by n_OK / n_KO; that prior shift is undone
    # before the temperature is fitted, or every p_KO comes out several times too high.
    bias = -np.log((len(y) - y.sum()) / max(y.sum(), 1))
    logit_oof += bias
    idx_va = np.arange(len(y))
    x_va, y_va, logit_va = feats[:, 0], y, logit_oof

    def nll(t):
        p = 1 / (1 + np.exp(-np.clip(logit_va / t, -50, 50)))
        return -np.mean(y_va * np.log(p + 1e-12) + (1 - y_va) * np.log(1 - p + 1e-12))

    temperature = minimize_scalar(nll, bounds=(0.05, 20.0), method="bounded").x

    # OOD: robust Mahalanobis in PCA space of all in-domain views (perturbed copies included),
    # and the distance off that space.
    z_all = (feats.reshape(-1, feats.shape[2]) - mean) / scale
    pca = PCA(PCA_DIMS, random_state=args.seed).fit(z_all)
    proj = pca.transform(z_all)
    mcd = MinCovDet(random_state=args.seed, support_fraction=0.9).fit(proj)
    d = np.sqrt(mcd.mahalanobis(proj))
    ood_scale = np.percentile(d, OOD_QUANTILE)
    centred = z_all - pca.mean_
    resid = np.sqrt(np.maximum((centred ** 2).sum(axis=1) - (proj ** 2).sum(axis=1), 0.0))
    # The distance off the subspace is a guard against frames unlike anything seen (black,
    # white), not a second detector: its boundary is the farthest in-domain view, so that
    # perturbed but readable welds are not sent to the operator by it.
    resid_scale = resid.max()

    params = {
        "mean": mean, "scale": scale, "coef": clf.coef_[0], "intercept": clf.intercept_[0],
        "bias": bias,
        "temperature": temperature, "pca_mean": pca.mean_, "pca_components": pca.components_,
        "mcd_location": mcd.location_, "mcd_precision": mcd.precision_, "ood_scale": ood_scale,
        "resid_scale": resid_scale,
    }
    # Soft outputs from the cost matrix (see challenge_solution/model.py): break-even p_KO
    # between OK and UNKNOWN, and between UNKNOWN and KO; the ECE's KO/OK ratio threshold
    # from the class weights 0.8 / 0.2 and the training class counts.
    cost, weights, default_w = load_cost()
    params.update(soft_thresholds(cost, n_ko=int(y.sum()), n_ok=int(len(y) - y.sum())))
    params.update(eps=1e-3, t_ko=0.5, t_ok=params["q_ok"])
    model = Model(params, trust=not args.no_trust)

    # Hard thresholds chosen on the out-of-fold predictions by the score's own formulas.
    import itertools

    # Only thresholds that can be right for a calibrated p_KO: the F1-optimal one is half the
    # best F1, so <= 0.5 (Lipton et al. 2014), and an OK threshold under the cost break-even
    # q_ok only adds UNKNOWN answers that cost more than they save. With ~30 training KO
    # (the quick demo) the search otherwise lands on such settings by chance.
    grid = {"t_ko": (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5),
            "t_ok": (params["q_ok"], 0.01, 0.015, 0.02, 0.03, 0.05, 0.08)}
    best = None
    q_oof = 1 / (1 + np.exp(-np.clip(logit_va / temperature, -50, 50)))
    ood_va = model.ood_score(x_va)
    # The choice maximises the objective's mean over bootstrap resamples of the out-of-fold
    # set, not its value on the set itself: with about a hundred KO the single-set optimum
    # flips between distant settings from one seed to the next.
    boot = np.random.default_rng(args.seed)
    counts = boot.multinomial(len(y_va), np.full(len(y_va), 1 / len(y_va)), size=N_RESAMPLES).astype(float)
    for values in itertools.product(*grid.values()):
        choice = dict(zip(grid, values))
        states, probs, _ = model.decide_scores(q_oof, ood_va, **choice)
        obj = [np.mean(v) for v in proxy_objective(y_va, seams[idx_va], states, probs, cost, weights,
                                                   default_w, counts)]
        # UOP is clipped at 0 in the score; its raw value breaks ties (the least negative).
        obj = (obj[0] + 1e-3 * min(obj[3], 0.0), *obj[1:])
        if best is None or obj[0] > best[0][0] + 1e-12:
            best = (obj, choice)
    for k, v in best[1].items():
        model.p[k] = np.float64(v)
    acc = np.mean((logit_va > 0) == (y_va == 1))
    print(f"out-of-fold: accuracy {acc:.3f}, temperature {temperature:.2f}, "
          f"thresholds {best[1]}, proxy {best[0][0]:.3f} (OP {best[0][1]:.2f}, "
          f"F1 {best[0][2]:.2f}, UOP {best[0][3]:.2f})")
    target = out / "challenge_solution"
    model.save(target)
    print(f"model written to {target / 'model.npz'} ({'trust' if model.trust else 'no-trust'}) "
          f"in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
