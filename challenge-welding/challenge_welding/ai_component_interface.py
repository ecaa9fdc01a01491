"""The participant interface, compatible with the published starter kit.

A submission's ``challenge_solution.AIComponent.MyAIComponent`` subclasses
:class:`AbstractAIComponent`. This module imports only numpy so that it can be
installed in a submission's own environment next to pinned dependencies.
"""

from abc import ABC, abstractmethod

import numpy as np


class AbstractAIComponent(ABC):
    """Abstract base class for AI components interface."""

    def __init__(self):
        # Both spellings: the starter kit's template and the published 1.0 package.
        self.AI_Component = None
        self.AI_component_meta_informations = {}
        self.ai_component = None
        self.ai_component_meta_informations = {}

    @abstractmethod
    def load_model(self, config_file=None):
        """Load whatever the component needs; ``config_file`` is optional."""

    @abstractmethod
    def predict(
        self,
        input_images: list[np.ndarray],
        images_meta_informations: list[dict],
        device: str = "cuda",
    ) -> dict:
        """Predict on a batch of RGB uint8 HxWx3 images.

        Returns a dict with ``predictions`` (KO, OK or UNKNOWN per image) and
        optionally ``probabilities`` ([p_KO, p_OK, p_UNKNOWN] per image) and
        ``OOD_scores`` (a real >= 0 per image; >= 1 means out of distribution).
        Each metadata dict holds only ``welding-seams`` and ``resolution``.
        """
