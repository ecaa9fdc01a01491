"""The explainability maps a submission returned: their reduction and their file.

predict() may return, per image, an HxW intensity map in [0, 1] (the solution
spec's optional ``explainability``). Full-resolution float maps are far too big to
keep (22,753 full-HD maps = 189 GB as float64), so the ingestion's child reduces
each map to uint8 at 1/MAP_SCALE of the resolution (:func:`reduce_map`) before it
crosses to the evaluator, and the ingestion stores them per set in
``PRED/<set>.explainability.parquet``:

    sample_id (str), height (int), width (int), map (binary: height*width uint8, row-major)

``height, width`` are the reduced shape (:func:`reduced_shape`). No maps returned:
no file. The child runs in the submission's environment and cannot import this
package: ``child.py`` carries a copy of MAP_SCALE and of the reduction, kept equal
by tests/ingestion/handover/test_wire.py.

The format's one definition: the ingestion writes it and the scoring reads it, so it
lives in the contract, the layer both import (neither imports the other for a format).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

MAP_SCALE = 4  # a map is kept at 1/MAP_SCALE of the image's height and width
SUFFIX = ".explainability.parquet"
COLUMNS = ("sample_id", "height", "width", "map")


def reduced_shape(h: int, w: int) -> tuple[int, int]:
    """The kept map's shape for an h x w image: (h // MAP_SCALE, w // MAP_SCALE), at least 1."""
    return max(1, h // MAP_SCALE), max(1, w // MAP_SCALE)


def reduce_map(m: np.ndarray) -> np.ndarray:
    """Area mean over MAP_SCALE x MAP_SCALE blocks, as uint8 (round(255 * mean)).

    Block i of the output covers rows [i*S, (i+1)*S), except the last one, which runs to
    the end: the h % S rows (and w % S columns) left over are folded into the last block,
    so every pixel counts once. ``m`` must be 2-D, finite and in [0, 1] (checked by the
    caller); an image smaller than S gives one block over all of it.
    """
    h, w = m.shape
    oh, ow = reduced_shape(h, w)
    rows = np.arange(oh) * MAP_SCALE
    cols = np.arange(ow) * MAP_SCALE
    sums = np.add.reduceat(np.add.reduceat(np.asarray(m, dtype=np.float64), rows, axis=0),
                           cols, axis=1)
    counts = np.outer(np.diff(np.append(rows, h)), np.diff(np.append(cols, w)))
    return np.rint(sums / counts * 255.0).clip(0, 255).astype(np.uint8)


def file_name(set_name: str) -> str:
    return f"{set_name}{SUFFIX}"


def maps_frame(sample_ids, maps):
    """The file's rows: one per sample, the map's bytes row-major."""
    import pandas as pd  # only the writer and reader need pandas

    return pd.DataFrame({"sample_id": [str(s) for s in sample_ids],
                         "height": [int(m.shape[0]) for m in maps],
                         "width": [int(m.shape[1]) for m in maps],
                         "map": [np.ascontiguousarray(m, dtype=np.uint8).tobytes() for m in maps]})


class MapsWriter:
    """The file's bytes built batch by batch: maps go into compressed row groups as they come,
    so a set's maps are never all held uncompressed (a full-HD map is 130 kB kept)."""

    ROW_GROUP_BYTES = 32 << 20

    def __init__(self):
        self.buf, self.writer, self.rows, self.size, self.count = io.BytesIO(), None, [], 0, 0

    def add(self, sample_ids, maps) -> None:
        for sid, m in zip(sample_ids, maps):
            self.rows.append((str(sid), m))
            self.size += m.nbytes
        if self.size >= self.ROW_GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if not self.rows:
            return
        table = pa.Table.from_pandas(maps_frame([r[0] for r in self.rows], [r[1] for r in self.rows]),
                                     preserve_index=False)
        if self.writer is None:
            import pyarrow.parquet as pq

            self.writer = pq.ParquetWriter(self.buf, table.schema)
        self.writer.write_table(table)
        self.count += len(self.rows)
        self.rows, self.size = [], 0

    def finish(self) -> bytes | None:
        """The parquet file's bytes; None when no map was added (then no file is written)."""
        self._flush()
        if self.writer is None:
            return None
        self.writer.close()
        return self.buf.getvalue()


def read_explainability(pred_dir, set_name: str, sample_ids=None) -> dict[str, np.ndarray] | None:
    """{sample_id: uint8 map (height, width)} of ``PRED/<set>.explainability.parquet``;
    None when the submission returned no maps for that set (no file). ``sample_ids``: read
    only these rows (the analyses need the KO samples' maps: at the full size, all the
    maps of a set take about 1 GB in memory, the KO ones a twentieth of it).

    Raises ValueError naming the file and the sample when a row's bytes do not match its shape.
    """
    import pandas as pd

    path = Path(pred_dir) / file_name(set_name)
    if not path.is_file():
        return None
    if sample_ids is None:
        df = pd.read_parquet(path)
    else:  # row filter in pyarrow: the other rows' bytes are never turned into objects
        wanted = sorted({str(s) for s in sample_ids})
        df = pd.read_parquet(path, filters=[("sample_id", "in", wanted)]) if wanted \
            else pd.read_parquet(path).iloc[:0]
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}")
    out = {}
    for sid, h, w, data in zip(df["sample_id"], df["height"], df["width"], df["map"]):
        if h < 1 or w < 1 or len(data) != int(h) * int(w):
            raise ValueError(f"{path}: sample {sid}: {len(data)} bytes for a {h}x{w} map")
        out[str(sid)] = np.frombuffer(data, dtype=np.uint8).reshape(int(h), int(w))
    return out
