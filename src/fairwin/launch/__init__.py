"""Launching a role's servers: here, on a declared host over SSH, or as containers, and knowing what they are.

``spec`` makes a role concrete for one start (placeholders filled, environment assembled, host resolved).
The launchers: ``local`` (a child process in its own process group), ``remote`` (detached from the SSH login
that started it, found again by ``remote_runs``) and ``container`` (docker or podman, through
``runtime_cli`` and ``inspect``). ``shell`` and ``ssh`` run one command here or on a host. What a start
checks about what it launched: the port's listener (``listeners``), the pinned files and checkouts
(``identity``, ``checkouts``), the speculative config asked for and reported (``speculative``,
``reported``), readiness (``readiness``) and where the server runs and how eagerly (``scheduling``).
"""
