"""The custody of production's hardware across windows and crashes.

The hold on production while a window runs (``hold``: taken down, proved quiet, given
back and watched), the hardware's lock that keeps two windows off one machine (``lock``,
and its remote form ``remote_lock``), a chain of windows that leaves production down
between them (``chain``), and recovery after fairwin died mid-window (``recover``).
"""
