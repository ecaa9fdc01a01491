"""Naive baseline: always answers UNKNOWN with full confidence and no OOD signal.

A reference point of the leaderboard, not a useful component: the score must
rate it low (docs/scoring.md, validation targets).
"""

import numpy as np

from challenge_welding.AIComponent_interface import AbstractAIComponent

STATE = "UNKNOWN"
ONE_HOT = {"KO": [1.0, 0.0, 0.0], "OK": [0.0, 1.0, 0.0], "UNKNOWN": [0.0, 0.0, 1.0]}


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        self.AI_component_meta_informations = {"name": "full-unknown", "answer": STATE}

    def predict(self, input_images: list[np.ndarray], images_meta_informations: list[dict],
                device: str = "cpu") -> dict:
        n = len(input_images)
        return {
            "predictions": [STATE] * n,
            "probabilities": [list(ONE_HOT[STATE]) for _ in range(n)],
            "OOD_scores": [0.0] * n,
        }
