"""The starter kit's local test of a component (``challenge-welding`` 1.0's ``inference_tools``).

``TestAIComponent`` loads a submission folder's ``MyAIComponent`` in this Python and runs it
on a dataset of the store, batch by batch, as the kit does. Where the kit and the evaluator
differ, it does what the evaluator does, so that a component that passes here passes there:
each image's metadata holds only ``welding-seams`` and ``resolution`` (the kit passed the
whole row, labels included); ``device`` is "cuda" only when a GPU is visible and is passed
only to a ``predict`` that takes it; the output is checked and normalised by the
evaluator's own rules (ingestion.run.validate: missing probabilities become the one-hot of the
prediction, missing OOD scores 0; a wrong length or a NaN is an error naming the sample).

It runs the component unconfined in this process: for the evaluator's isolated install and
sandbox use ``challenge-welding check-submission`` / ``evaluate``.
"""

from __future__ import annotations

import inspect
import sys
import time
from pathlib import Path

import numpy as np

from challenge_welding.contract.names import PRED_COLUMNS
from challenge_welding.user_interface import ChallengeUI

RESULT_COLUMNS = PRED_COLUMNS[1:]  # predicted_state, scores KO/OK/UNKNOWN/OOD, compute_time


def evaluator_meta(row, image: np.ndarray) -> dict:
    """The metadata the evaluator gives ``predict`` for one image: seam and [w, h] of the image."""
    return {"welding-seams": row["welding-seams"], "resolution": [int(image.shape[1]), int(image.shape[0])]}


def batch_bounds(n: int, batch_size: int) -> list[tuple[int, int]]:
    """[(start, end)] of consecutive batches of ``batch_size`` rows over ``n`` rows (the last shorter)."""
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return [(s, min(s + int(batch_size), n)) for s in range(0, n, int(batch_size))]


class TestAIComponent:
    """Load a component and run it on a dataset as the evaluation pipeline does (the kit's class).

    proposed_solution_path: the submission folder (holding ``challenge_solution/``).
    meta_root_path: a folder for the results (the tutorials write res_inference.parquet there).
    cache_strategy, cache_dir: those of the ChallengeUI that reads the images (its store:
        ``CHALLENGE_WELDING_STORE`` when set, else the public store).
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, proposed_solution_path, meta_root_path, cache_strategy="remote",
                 cache_dir=".cache_pipeline"):
        self.meta_root_path = meta_root_path
        self.ai_component_path = proposed_solution_path
        self.ai_component = None
        self.cache_strategy = cache_strategy
        self.cache_dir = cache_dir

    def load_proposed_solution(self):
        """Import ``challenge_solution.AIComponent.MyAIComponent`` from the submission folder,
        make one and call its ``load_model()``."""
        folder = str(Path(self.ai_component_path).resolve())
        sys.path.insert(0, folder)
        # A challenge_solution imported before from another folder would shadow this one.
        for name in [m for m in sys.modules if m == "challenge_solution" or m.startswith("challenge_solution.")]:
            del sys.modules[name]
        from challenge_solution.AIComponent import MyAIComponent

        self.ai_component = MyAIComponent()
        self.ai_component.load_model()
        print("AI component loaded")

    def perform_grouped_inference(self, evaluation_dataset, results_inference_path, batch_size=10):
        """Run ``predict`` on the dataset's images, ``batch_size`` at a time; return the metadata
        frame (indexed by sample_id) with predicted_state, scores KO, scores OK, scores UNKNOWN,
        scores OOD and compute_time (seconds per image: the batch's predict time / its size),
        also written as parquet to ``results_inference_path``."""
        from tqdm import tqdm

        from challenge_welding.ingestion.install.environment import detect_device
        from challenge_welding.ingestion.run.validate import Notes, validate_output

        if self.ai_component is None:
            raise RuntimeError("no component loaded: call load_proposed_solution() first")
        started = time.time()
        output_df = evaluation_dataset.copy().set_index("sample_id")
        user_ui = ChallengeUI(cache_strategy=self.cache_strategy, cache_dir=self.cache_dir)
        device, why = detect_device()
        kwargs = {"device": device} if "device" in inspect.signature(self.ai_component.predict).parameters else {}
        n = len(output_df)
        states, probs, ood, seconds = [], np.zeros((n, 3)), np.zeros(n), np.zeros(n)
        notes = Notes()
        bounds = batch_bounds(n, batch_size)
        print(f"Number of batch to process for inference : {len(bounds)} , device {device} ({why})")
        for start, end in tqdm(bounds):
            ids = [str(s) for s in output_df.index[start:end]]
            images, metas = [], []
            for i in range(start, end):
                row = output_df.iloc[i]
                image = user_ui.open_image(row["path"])
                images.append(image)
                metas.append(evaluator_meta(row, image))
            t0 = time.perf_counter()
            result = self.ai_component.predict(images, metas, **kwargs)
            elapsed = time.perf_counter() - t0
            valid = validate_output(result, ids, notes)
            states += valid.states
            probs[start:end], ood[start:end] = valid.probabilities, valid.ood
            seconds[start:end] = elapsed / (end - start)
        for line in notes.lines("warning: "):
            print(line)
        for column, values in zip(RESULT_COLUMNS, (states, *probs.T, ood, seconds)):
            output_df[column] = list(values) if column == "predicted_state" else values
        out = Path(results_inference_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        output_df.to_parquet(out)
        print("cumulated inference time ", time.time() - started)
        return output_df
