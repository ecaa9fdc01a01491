"""Solution-1: a small trustworthy component (features + logistic regression,
temperature scaling, Mahalanobis OOD score, cost-aware UNKNOWN).

Files are found next to this module (ROOT_PATH), so the installed package works
from any working directory. See challenge_solution/model.py for the decisions.
"""

from pathlib import Path

import numpy as np

from challenge_solution.explain import dark_blob_map
from challenge_solution.features import batch_features
from challenge_solution.model import Model
from challenge_welding.AIComponent_interface import AbstractAIComponent

ROOT_PATH = Path(__file__).parent.resolve()


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        if not (ROOT_PATH / "model.npz").exists():
            raise FileNotFoundError(
                f"{ROOT_PATH / 'model.npz'} is missing: train it with "
                "`python reference-solutions/Solution-1/train.py --data DATA/training_data --out FOLDER`")
        self.AI_Component = Model.load(ROOT_PATH)
        self.AI_component_meta_informations = {"name": "Solution-1", "trust": self.AI_Component.trust}

    def predict(self, input_images: list[np.ndarray], images_meta_informations: list[dict],
                device: str = "cpu") -> dict:
        if not input_images:
            return {"predictions": [], "probabilities": [], "OOD_scores": [], "explainability": []}
        states, probs, ood = self.AI_Component.decide(batch_features(input_images))
        return {
            "predictions": list(states),
            "probabilities": probs.tolist(),
            "OOD_scores": ood.tolist(),
            # where the dark-blob evidence lies (challenge_solution/explain.py): the solution spec's optional map
            "explainability": [dark_blob_map(image) for image in input_images],
        }
