"""fairwin: did this change really make inference faster?

Windows where control and candidate take turns on one server's hardware, the
server's own counters pooled per repeat, and a registered decision rule. The public API is what this package and its
subpackages export in ``__all__``; modules whose names start with ``_`` are private.
"""

__version__ = "0.1.0"
