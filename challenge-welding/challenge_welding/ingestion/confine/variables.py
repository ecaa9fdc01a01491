"""The environment variables participant code gets, and those of the evaluator's installer.

Participant code (setup.py, the build backend, import, load_model, predict) runs with an
environment built from an explicit list, never the caller's variables: a ``*_TOKEN`` or an
``AWS_SECRET_ACCESS_KEY`` set in the organiser's shell does not reach it (docs/integrity.md,
"The environment of participant code"). The evaluator's own uv/pip, which runs no participant
code, keeps in addition what reaching the index needs. Used at install (install/environment.py)
and at run time (handover/process.py).
"""

from __future__ import annotations

import os
from pathlib import Path


# What participant code (setup.py, the build backend, import, load_model, predict) gets as
# its environment: these variables, set here, and nothing else of the caller's.
PARTICIPANT_ENV = ("PATH", "HOME", "TMPDIR", "TEMP", "TMP", "XDG_CACHE_HOME", "LANG", "LC_ALL",
                   "PYTHONNOUSERSITE", "PIP_DISABLE_PIP_VERSION_CHECK")
MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
# ... plus these, passed through from the caller when set: the GPU's selection (CUDA, the
# NVIDIA container runtime), its libraries' path, and the organiser's thread counts. Named one
# by one: a prefix such as NVIDIA_ would also pass NVIDIA_API_KEY.
PARTICIPANT_ENV_PASS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
                        "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA", "LD_LIBRARY_PATH",
                        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# The evaluator's own uv/pip (no participant code runs in it) also keeps what reaching the
# index needs: proxies, CA bundles, the installers' own settings (UV_*, PIP_*: index URLs,
# find-links, caches), and where their caches and configuration live.
INSTALLER_ENV_PASS = ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HTTP_PROXY", "HTTPS_PROXY",
                      "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy",
                      "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
INSTALLER_ENV_PREFIXES = ("UV_", "PIP_")


def participant_env(home: str | Path, tmp: str | Path, environ=None) -> dict:
    """The whole environment of participant code: :data:`PARTICIPANT_ENV` set here (HOME and
    the temp folders = its scratch, a minimal PATH, a UTF-8 locale), plus the variables of
    :data:`PARTICIPANT_ENV_PASS` found in ``environ`` (default: ours). Never a token, a key,
    a proxy or an index URL of the caller's."""
    environ = os.environ if environ is None else environ
    env = {"PATH": MINIMAL_PATH, "HOME": str(home), "TMPDIR": str(tmp), "TEMP": str(tmp),
           "TMP": str(tmp), "XDG_CACHE_HOME": str(Path(home) / ".cache"), "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8", "PYTHONNOUSERSITE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.update({k: environ[k] for k in PARTICIPANT_ENV_PASS if k in environ})
    return env


def installer_env(tmp: str | Path, environ=None) -> dict:
    """The evaluator's uv/pip's environment (it runs no participant code): the participant's
    list with the caller's PATH, plus :data:`INSTALLER_ENV_PASS` and UV_*/PIP_* settings."""
    environ = os.environ if environ is None else environ
    env = participant_env(environ.get("HOME", str(tmp)), tmp, environ)
    env.pop("XDG_CACHE_HOME")  # uv/pip's caches stay where the organiser keeps them
    env["PATH"] = environ.get("PATH", MINIMAL_PATH)
    env.update({k: v for k, v in environ.items()
                if k in INSTALLER_ENV_PASS or k.startswith(INSTALLER_ENV_PREFIXES)})
    return env
