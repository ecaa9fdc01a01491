"""The starter kit's data interface (``challenge-welding`` 1.0's ``user_interface``), written here.

Participants develop with the published starter kit, whose package has our distribution and
import names: installing ours replaces it, so ours offers the kit's public API with the same
module path, names and signatures (docs/contracts.md, "The published kit's API").

A *store* is the challenge's storage root, read over HTTP(S) or from a local folder:
``STORE/challenge-welding/datasets_list.yml`` (a YAML list of dataset names),
``STORE/challenge-welding/datasets/<name>/metadata/ds_meta.parquet`` and the images at
``STORE/<path>``, ``path`` being the metadata's column (relative to the store).
The environment variable ``CHALLENGE_WELDING_STORE`` (a URL or a folder), when set, is the
store of every ChallengeUI made without ``base_url``, those made inside
``inference_tools.TestAIComponent`` included: a tutorial runs unchanged against a local copy.

Differences from the kit, each a superset of its behaviour:
- a local folder (or ``file://`` URL) works as a store, not only an HTTP(S) URL;
- the "local" cache keeps the store's bytes as they are (the kit re-encodes the JPEG it
  caches, so a cached image's pixels differ from the first read's);
- ``open_image`` always returns RGB uint8 HxWx3 (what the evaluator hands to ``predict``),
  writable;
- ``check_integrity`` reads each image through the store (the kit reads ``external_path``,
  an absolute URL of the organisers' server) and accepts the digest as raw bytes or hex;
- a missing dataset or file raises :class:`StoreError` (a ``ConnectionError``, as the kit
  raises) with one line naming what is missing, where, and what to check.
"""

from __future__ import annotations

import hashlib
import io
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath

import numpy as np

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.names import DATASETS_LIST

# The organisers' public store, the kit's default base_url.
PUBLIC_STORE = "https://minio-storage.apps.confianceai-public.irtsysx.fr/"
STORE_ENV = "CHALLENGE_WELDING_STORE"
ANOMALIES_FILE = "anomalous_samples_list.yml"  # the kit's name, written in the working folder
TIMEOUT_S = 30


class StoreError(ChallengeError, ConnectionError):
    """A file is missing from the store or the store cannot be reached.

    A ``ConnectionError`` because the kit raises that, and participants' code catches it.
    """


def default_store() -> str:
    """``CHALLENGE_WELDING_STORE`` when set (and not blank), else the public store."""
    value = os.environ.get(STORE_ENV, "").strip()
    return value or PUBLIC_STORE


def is_url(location: str) -> bool:
    return urllib.parse.urlsplit(str(location)).scheme.lower() in ("http", "https")


def store_root(location) -> str:
    """The store's root as a string ending in '/', or as a folder path for a local store.

    ``file://`` URLs become folder paths. An HTTP(S) root gets its trailing slash, because
    relative paths are appended to it (``https://host/bucket`` -> ``https://host/bucket/``).
    """
    text = str(location)
    if is_url(text):
        return text if text.endswith("/") else text + "/"
    if text.lower().startswith("file://"):
        return urllib.request.url2pathname(urllib.parse.urlsplit(text).path)
    return text


def relative_path(rel) -> PurePosixPath:
    """A metadata ``path`` checked to stay inside the store (and inside a cache folder).

    Raises ValueError for an absolute path or one with '..' (it would read or write outside).
    Backslashes are separators too (a path written on Windows).
    """
    text = str(rel).replace("\\", "/")
    p = PurePosixPath(text)
    if not text or p.is_absolute() or ".." in p.parts or (p.parts and ":" in p.parts[0]):
        raise ValueError(f"path {rel!r} is not relative to the store (absolute or with '..')")
    return p


def location_of(root: str, rel) -> str:
    """Where ``rel`` is in the store ``root`` (see store_root): a URL or a local file path."""
    p = relative_path(rel)
    if is_url(root):
        return root + urllib.parse.quote(p.as_posix(), safe="/")
    return str(Path(root, *p.parts))


def read_location(location: str, what: str) -> bytes:
    """The bytes at ``location`` (URL or file); StoreError naming ``what`` when they are missing."""
    hint = (f"check the store's address (base_url, or the environment variable {STORE_ENV})")
    if is_url(location):
        try:
            with urllib.request.urlopen(location, timeout=TIMEOUT_S) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            raise StoreError(f"{what} not found at {location} (HTTP {exc.code}): {hint}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise StoreError(f"cannot reach {location} for {what} ({reason}): {hint}") from None
    try:
        return Path(location).read_bytes()
    except FileNotFoundError:
        raise StoreError(f"{what} not found: no file {location}: {hint}") from None
    except OSError as exc:
        raise StoreError(f"cannot read {what} at {location} ({exc.strerror}): {hint}") from None


def decode_rgb(data: bytes, what: str) -> np.ndarray:
    """RGB uint8 HxWx3 of an image file's bytes (greyscale, palette or alpha converted); a
    writable array (np.asarray of a Pillow image is read-only, which torch warns about)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            return np.array(img if img.mode == "RGB" else img.convert("RGB"))
    except (UnidentifiedImageError, OSError) as exc:
        raise StoreError(f"{what} is not a readable image ({exc})") from None


def digest_bytes(value) -> bytes | None:
    """The metadata's sha256 as 32 raw bytes (published form), from raw bytes or 64 hex digits."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        try:
            return bytes.fromhex(value.strip())
        except ValueError:
            return None
    return None


def write_atomic(path: Path, data: bytes) -> None:
    """Write through a temporary file, so that an interrupted run leaves no truncated cache file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class ChallengeUI:
    """Access to the challenge's datasets: list them, read their metadata, open and show
    images, check the files against their digests (the starter kit's interface).

    cache_strategy: "remote" reads every image from the store each time; "local" keeps
        each image read in ``cache_dir`` (at the same relative path) and reads it from
        there next time; a file already in ``cache_dir`` is read without the store.
    cache_dir: the folder of the "local" cache.
    base_url: the store, an HTTP(S) URL or a local folder; by default
        ``CHALLENGE_WELDING_STORE`` when set, else the organisers' public store.
    ds_meta_path: the list of datasets, relative to the store.
    """

    def __init__(self, cache_strategy="remote", cache_dir=".cache", base_url=None,
                 ds_meta_path=DATASETS_LIST):
        if cache_strategy not in ("local", "remote"):
            raise ValueError(f"cache_strategy must be 'local' or 'remote', got {cache_strategy!r}")
        self.cache_strategy = cache_strategy
        self.cache_dir = cache_dir
        self.base_url = store_root(default_store() if base_url is None else base_url)
        self.ds_meta_path = ds_meta_path
        # the kit's attribute: the full location of the datasets list
        self.ds_list = location_of(self.base_url, ds_meta_path)

    def _meta_location(self, ds_name) -> str:
        return location_of(self.base_url, f"challenge-welding/datasets/{ds_name}/metadata/ds_meta.parquet")

    def list_datasets(self) -> list:
        """The names of the datasets in the store (its datasets_list.yml)."""
        import yaml

        data = read_location(self.ds_list, "the list of datasets")
        names = yaml.safe_load(data.decode("utf-8"))
        if not isinstance(names, list):
            raise StoreError(f"{self.ds_list}: expected a YAML list of dataset names, "
                             f"got {type(names).__name__}")
        return names

    def get_ds_metadata_dataframe(self, ds_name):
        """The metadata of dataset ``ds_name`` as a pandas DataFrame (one row per image)."""
        import pandas as pd

        location = self._meta_location(ds_name)
        print(location)  # as the kit does: says which store is read
        try:
            data = read_location(location, f"the metadata of dataset {ds_name!r}")
        except StoreError as exc:
            raise StoreError(f"{exc}; the store lists: {self._names_or_reason()}") from None
        return pd.read_parquet(io.BytesIO(data))

    def _names_or_reason(self) -> str:
        try:
            return ", ".join(map(str, self.list_datasets())) or "no dataset"
        except StoreError:
            return f"nothing (no readable {self.ds_meta_path})"

    def _cache_path(self, image_url) -> Path:
        return Path(self.cache_dir, *relative_path(image_url).parts)

    def open_image(self, image_url) -> np.ndarray:
        """The image at ``image_url`` (the metadata's ``path``) as RGB uint8 HxWx3."""
        what = f"image {image_url}"
        if self.cache_strategy == "local":
            cached = self._cache_path(image_url)
            if cached.is_file():
                return decode_rgb(cached.read_bytes(), f"{what} (cached at {cached})")
            data = read_location(location_of(self.base_url, image_url), what)
            img = decode_rgb(data, what)  # decoded before caching: no broken file is kept
            write_atomic(cached, data)
            return img
        return decode_rgb(read_location(location_of(self.base_url, image_url), what), what)

    def display_image(self, df, index: int, show_info: bool = False):
        """Open the image of row ``index`` of ``df`` and show it (matplotlib); return it."""
        from matplotlib import pyplot as plt

        sample = df.iloc[index]
        if show_info:
            print("opening image metadata with idx ..", index)
            print(sample.to_dict())
        img = self.open_image(sample["path"])
        if show_info:
            print("size of the opened image", img.shape)
        plt.figure()
        plt.imshow(img, interpolation="nearest")
        plt.title(f"Class: {sample.get('class')}, blur_class:{sample.get('blur_class')}")
        plt.show()
        return img

    def check_integrity(self, ds_name) -> list:
        """Compare each image's sha256 with its metadata; return the anomalies.

        An anomaly is a file whose digest differs, or that cannot be read: a dict with
        ``index`` (row position), ``sample_id`` and ``full_path`` (where it was read).
        The list is also written to anomalous_samples_list.yml in the working folder.
        """
        import yaml
        from tqdm import tqdm

        meta = self.get_ds_metadata_dataframe(ds_name)
        anomalies = []
        print("Begin checking integrity of dataset : ", ds_name, " . . . ")
        for i in tqdm(range(len(meta))):
            row = meta.iloc[i]
            location = location_of(self.base_url, row["path"])
            try:
                found = hashlib.sha256(read_location(location, f"image {row['path']}")).digest()
            except StoreError:
                found = None
            if found is None or found != digest_bytes(row["sha256"]):
                anomaly = {"index": i, "sample_id": str(row["sample_id"]), "full_path": location}
                anomalies.append(anomaly)
                print("\n anomalous image detected : ", anomaly)
        Path(ANOMALIES_FILE).write_text(yaml.safe_dump(anomalies), encoding="utf-8")
        print("integrity checking is complete")
        if anomalies:
            print(f"Warning : {len(anomalies)} sample(s) are corrupted or missing, see "
                  f"{ANOMALIES_FILE} for the list")
        return anomalies
