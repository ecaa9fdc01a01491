"""The starter kit's PyTorch dataset and dataloader (``challenge-welding`` 1.0's ``dataloaders``).

torch is optional: it is imported with this module when installed (the kit imports it
unconditionally). Without it, :class:`ChallengeWeldingDataset` still works as a plain
sequence of samples (``len``, ``[i]``), and :func:`create_pytorch_dataloader` says in one
line what to install.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.user_interface import ChallengeUI

try:  # a torch Dataset when torch is there (DataLoader accepts any sequence, but isinstance checks do not)
    from torch.utils.data import Dataset as _Base
except ImportError:
    _Base = object

class TorchMissing(ChallengeError, ImportError):
    """PyTorch is needed and not installed (an ImportError, as importing it would raise)."""


TORCH_MISSING = ("create_pytorch_dataloader needs PyTorch, which is not installed: "
                 "pip install torch (the published reference solution pins torch==2.6.0)")


def resized_rgb(image: np.ndarray, size) -> np.ndarray:
    """``image`` (RGB uint8 HxWx3) resized to ``size`` = (width, height) with Pillow, as the kit does."""
    from PIL import Image

    width, height = (int(v) for v in size)
    return np.array(Image.fromarray(image, "RGB").resize((width, height)))


class ChallengeWeldingDataset(_Base):
    """The images of ``meta_df`` read through ``user_ui``, one sample per row.

    A sample is ``{"image": RGB uint8 array, "meta": the row as a dict}``. ``resize``
    (width, height) resizes every image and sets ``meta["resolution"]`` to it; ``transform``
    is called on the sample last. Batching images of several sizes needs one of the two.
    """

    def __init__(self, user_ui: ChallengeUI, meta_df, resize=None, transform: Callable = None):
        self.meta_df = meta_df
        self.user_ui = user_ui
        self.resize = resize
        self.transform = transform

    def __len__(self):
        return len(self.meta_df)

    def __getitem__(self, idx):
        if not 0 <= idx < len(self.meta_df):  # a plain sequence must end iteration by IndexError
            raise IndexError(f"sample index {idx} out of range (dataset of {len(self.meta_df)})")
        row = self.meta_df.iloc[idx]
        sample = {"image": self.user_ui.open_image(row["path"]), "meta": row.to_dict()}
        if self.resize:
            sample["image"] = resized_rgb(sample["image"], self.resize)
            # a list, as the kit sets it: the published numpy resolution breaks torch's collate
            sample["meta"]["resolution"] = list(self.resize)
        if self.transform:
            sample = self.transform(sample)
        return sample


def create_pytorch_dataloader(dataset: ChallengeWeldingDataset, batch_size, shuffle=False, num_workers=0):
    """A ``torch.utils.data.DataLoader`` over ``dataset`` (the kit's signature)."""
    try:
        from torch.utils.data import DataLoader
    except ImportError:
        raise TorchMissing(TORCH_MISSING) from None
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers)
