"""cnn-small: a small convolutional network in plain numpy, for the rehearsal's costs.

Not a model of welds: its weights are random but fixed (a seed), so its answers carry no
skill. It exists so that the rehearsal (`challenge-welding rehearse`) and the capacity
figures run a component whose CPU cost per image is a deep-learning component's, and whose
outputs are valid: a state, probabilities summing to 1 and an OOD score >= 0. Measured
through the ingestion on full-HD images, CPU, batches of 10 (benchmarks/published_solution.py,
2026-11-24, 2 cores): 21.7 ms median per image, 2.9x the published TensorFlow reference
solution's 7.6 ms in the same run: a heavier component than the published one, so the
capacity figures built on it err on the safe side.

Network: the image resampled (nearest) to INPUT x INPUT, then 3x3 convolutions of
stride 2 with ReLU (channels WIDTHS), global average pooling, a dense layer to three
logits (KO, OK, UNKNOWN) and a softmax; the OOD score is the distance of the pooled
features to their running mean over the images seen so far, in units of their spread.
Convolutions are im2col + one matrix product (numpy's BLAS), the way frameworks run
them on CPU.
"""

import numpy as np

from challenge_welding.AIComponent_interface import AbstractAIComponent

SEED = 0
INPUT = 320                      # side of the square input, pixels
WIDTHS = (3, 32, 64, 128, 256)   # channels: RGB in, then each conv layer's output
STATES = ("KO", "OK", "UNKNOWN")


def im2col(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(H, W, C) -> (H/2 * W/2, 9 C) patches of a 3x3 stride-2 convolution, zero padding 1."""
    h, w, c = x.shape
    p = np.pad(x, ((1, 1), (1, 1), (0, 0)))
    oh, ow = (h + 1) // 2, (w + 1) // 2
    cols = [p[dy:dy + 2 * oh:2, dx:dx + 2 * ow:2] for dy in range(3) for dx in range(3)]
    return np.concatenate(cols, axis=2).reshape(oh * ow, 9 * c), oh, ow


class MyAIComponent(AbstractAIComponent):
    def load_model(self, config_file=None):
        rng = np.random.default_rng(SEED)
        self.convs = []
        for cin, cout in zip(WIDTHS[:-1], WIDTHS[1:]):  # He initialisation: activations stay O(1)
            self.convs.append((rng.normal(0, np.sqrt(2 / (9 * cin)), (9 * cin, cout)).astype(np.float32),
                               np.zeros(cout, np.float32)))
        self.dense = rng.normal(0, 1 / np.sqrt(WIDTHS[-1]), (WIDTHS[-1], 3)).astype(np.float32)
        self.mean = np.zeros(WIDTHS[-1])
        self.sq = np.ones(WIDTHS[-1])
        self.seen = 0
        self.AI_component_meta_informations = {"name": "cnn-small", "seed": SEED, "input": INPUT,
                                               "widths": list(WIDTHS)}

    def features(self, image: np.ndarray) -> np.ndarray:
        h, w = image.shape[:2]
        rows = np.arange(INPUT) * h // INPUT
        cols = np.arange(INPUT) * w // INPUT
        x = image[rows][:, cols].astype(np.float32) / 255.0 - 0.5
        for weights, bias in self.convs:
            patches, oh, ow = im2col(x)
            x = np.maximum(patches @ weights + bias, 0.0).reshape(oh, ow, -1)
        return x.mean(axis=(0, 1))

    def predict(self, input_images, images_meta_informations, device="cpu"):
        states, probabilities, ood = [], [], []
        for image in input_images:
            f = self.features(image)
            logits = f @ self.dense
            p = np.exp(logits - logits.max())
            p /= p.sum()
            self.seen += 1
            delta = f - self.mean
            self.mean += delta / self.seen
            self.sq += delta * (f - self.mean)
            spread = np.sqrt(self.sq / self.seen) + 1e-6
            states.append(STATES[int(np.argmax(p))])
            probabilities.append([float(v) for v in p])
            ood.append(float(np.sqrt(np.mean((delta / spread) ** 2))))
        return {"predictions": states, "probabilities": probabilities, "OOD_scores": ood}
