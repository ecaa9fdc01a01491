"""The options of one ingestion run, each default written once (:class:`IngestOptions`).

``ingest`` (run.py), the ``ingest`` command's argparse (commands/ingest.py, which takes its
defaults from here), ``evaluate`` and ``check-submission`` all build this one object; its
values are checked once, in ``__post_init__``: a bad value is one ChallengeError naming the
command-line flag, what it must be and what was given. Standard library only, so that
``challenge-welding ingest --help`` stays instant (commands/cli.py).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

from challenge_welding.contract.errors import ChallengeError
from challenge_welding.contract.names import SET_NAMES

# exclusive_predict: in which sets no decoding runs during predict() calls (True/False: all/none)
EXCLUSIVE = {"timed": "timed", "all": "all", "none": "none", True: "all", False: "none"}
# the options whose command-line flag is not --<name with dashes>
FLAGS = {"isolation": "--no-isolation", "cache_dir": "--env-cache", "warmup": "--no-warmup",
         "progress": "--no-progress"}


def flag(name: str) -> str:
    """The command-line flag of option ``name`` (``batch_size`` -> ``--batch-size``)."""
    return FLAGS.get(name, "--" + name.replace("_", "-"))


@dataclass(frozen=True)
class IngestOptions:
    """Every option of ``ingest``; build it with keywords, an unknown one is a TypeError."""

    batch_size: int = 10                  # images per predict() call: the starter kit's default
    device: str | None = None             # "cuda" / "cpu"; None: cuda if a GPU is visible
    sets: tuple | None = None             # None: every set present, in SET_NAMES' order
    isolation: bool = True                # False: the folder runs in this environment, no install
    installer: str = "auto"               # "uv", "pip"; auto: uv when available
    cache_dir: str | None = None          # environments' cache; None: ~/.cache/challenge-welding/envs
    wheelhouse: str | None = None         # extra folder of wheels (--find-links)
    no_index: bool = False                # install only from the wheelhouse
    allow_source_builds: bool = False     # a pinned dependency without a wheel is built from source
    python: str | None = None             # the submission's interpreter; None: the evaluator's own
    batch_timeout: float = 600.0          # seconds per predict() call
    total_timeout: float | None = None    # seconds for all predict() calls; None or 0: no limit
    load_timeout: float = 1800.0          # seconds for import + load_model()
    install_timeout: float = 1800.0       # seconds per install step
    workers: int | None = None            # JPEG decoding threads; None or 0: all cores
    max_log_mb: float = 20.0              # cap of the submission's stdout/stderr log
    warmup: bool = True                   # one untimed predict() on noise before the first timed one
    exclusive_predict: str = "timed"      # sets where no decoding runs during predict(): timed/all/none
    decode_stock_mb: float = 384.0        # memory for batches decoded ahead between timed calls (0: one)
    no_network: bool = False              # no TCP at install time either (Landlock ABI >= 4)
    run_network: bool = False             # organisers: TCP allowed to the submission while it runs
    max_processes: int = 512              # the fork-storm cap of the submission's processes (0: none)
    unsafe_unconfined: bool = False       # run even where no layer confines the submission's files
    progress: bool = True                 # progress bars (on a terminal only)
    verbose: bool = True                  # log lines on stderr (the log file is always written)
    keep_workdir: bool = False            # keep the temporary work folder (check-submission)
    work_parent: str | None = None        # where the work folder (cw-ingest-*) is made; None: the
                                          # temporary folder (check-submission: its own locked one)
    install_progress: Callable | None = field(default=None, compare=False)  # a line sink for installs

    def __post_init__(self):
        _choice(self, "device", (None, "cuda", "cpu"))
        _choice(self, "installer", ("auto", "uv", "pip"))
        _choice(self, "exclusive_predict", tuple(EXCLUSIVE))
        object.__setattr__(self, "exclusive_predict", EXCLUSIVE[self.exclusive_predict])
        _number(self, "batch_size", 1, integer=True)
        _number(self, "workers", 0, integer=True, none=True)
        _number(self, "max_processes", 0, integer=True)
        for name in ("batch_timeout", "load_timeout", "install_timeout", "max_log_mb"):
            _number(self, name, 0.0, strict=True)
        _number(self, "total_timeout", 0.0, none=True)
        _number(self, "decode_stock_mb", 0.0)
        names = list(SET_NAMES) if self.sets is None else [self.sets] if isinstance(self.sets, str) \
            else list(self.sets)
        bad = [n for n in names if n not in SET_NAMES]
        if bad or not names:
            raise ChallengeError(f"{flag('sets')}: unknown set(s) {', '.join(map(str, bad)) or '(none given)'}"
                                 f" -> name sets among {', '.join(SET_NAMES)}")
        object.__setattr__(self, "sets", tuple(names))

    @classmethod
    def from_args(cls, args) -> "IngestOptions":
        """The options of parsed command-line arguments: each option whose flag the command has
        (its argparse dest; a ``--no-X`` flag gives ``X = not`` its value), the others default."""
        values = {}
        for f in dataclasses.fields(cls):
            dest = flag(f.name)[2:].replace("-", "_")
            if hasattr(args, dest):
                value = getattr(args, dest)
                values[f.name] = not value if dest == "no_" + f.name else value
        return cls(**values)


def _choice(opt, name, allowed):
    value = getattr(opt, name)
    if value not in allowed:
        shown = ", ".join("none" if a is None else str(a) for a in allowed if not isinstance(a, bool))
        raise ChallengeError(f"{flag(name)}: {value!r} is not a choice -> use one of {shown}")


def _number(opt, name, low, integer=False, strict=False, none=False):
    """Option ``name``: a number >= ``low`` (> ``low`` if ``strict``), whole if ``integer``, or None."""
    value = getattr(opt, name)
    if value is None and none:
        return
    kind = "a whole number" if integer else "a number"
    ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    ok = ok and math.isfinite(value) and (value > low if strict else value >= low)
    if not ok:
        default = next(f.default for f in dataclasses.fields(opt) if f.name == name)
        raise ChallengeError(f"{flag(name)}: must be {kind} {'>' if strict else '>='} {low:g}, got "
                             f"{value!r} -> leave it out for the default "
                             f"({'none' if default is None else f'{default:g}'})")
