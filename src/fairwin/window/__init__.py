"""The window: production down, control and candidate starts taking turns, the decision, production back.

``preflight`` and ``admission`` refuse a window before anything is touched; ``run`` opens it (the lock, a
new directory). ``machine`` is the window as one method per journaled step, ``opening`` and ``closing`` its
first and last steps, ``state`` what the steps leave behind. Each start (``start``, ``start_context``,
``processes``, ``warmup``, ``streams``) launches a role, warms it and runs every cell's waves; ``looks``
takes a sequential rule's looks between starts. ``progress`` is the events a display follows and ``shield``
keeps the close running however often it is cancelled.
"""
