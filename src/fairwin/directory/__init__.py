"""A window's directory on disk: its files by name (``WindowDir``), its journal of steps, its environment.

Low in the layers, below everything that reads a window's files (gates, the archive,
reports, the promotion gate), so that each names a file through :class:`WindowDir`
instead of spelling it again.
"""
