"""Naive baseline: random answers, random probabilities, random OOD scores.

Seeded in load_model, so one evaluation run is reproducible when the batches
arrive in the same order. A reference point of the leaderboard only.
"""

import numpy as np

from challenge_welding.AIComponent_interface import AbstractAIComponent

STATES = ("KO", "OK", "UNKNOWN")
SEED = 0


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        self.rng = np.random.default_rng(SEED)
        self.AI_component_meta_informations = {"name": "random", "seed": SEED}

    def predict(self, input_images: list[np.ndarray], images_meta_informations: list[dict],
                device: str = "cpu") -> dict:
        n = len(input_images)
        probabilities = self.rng.dirichlet(np.ones(len(STATES)), size=n)
        states = [STATES[i] for i in self.rng.integers(0, len(STATES), size=n)]
        ood_scores = self.rng.uniform(0.0, 2.0, size=n)
        return {
            "predictions": states,
            "probabilities": probabilities.tolist(),
            "OOD_scores": ood_scores.tolist(),
        }
