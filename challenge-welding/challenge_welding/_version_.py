"""The published kit's version module (``challenge_welding._version_``, generated there by
setuptools-scm): kept so that code importing it still runs; the version is the package's."""

from challenge_welding import __version__

version = __version__
__version_tuple__ = version_tuple = tuple(int(p) if p.isdigit() else p for p in __version__.split("."))

__all__ = ["__version__", "__version_tuple__", "version", "version_tuple"]
