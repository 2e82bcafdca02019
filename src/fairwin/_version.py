"""The installed fairwin's version, from its package metadata (pyproject.toml is the one place it is set)."""

from importlib.metadata import version

__version__ = version("fairwin")
