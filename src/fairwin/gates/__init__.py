"""The gates: everything a window must pass before any host is touched, each with a receipt.

``sequence`` runs them in order. Qualification carried across commits only when nothing outside the
measurement layer changed (``qualify``, ``binding``, ``foreign_admission``), correctness receipts
(``correctness``, ``receipt``), the API rehearsal against production (``rehearsal``, ``probes``), the time
budget the window must fit (``estimate``, ``budget``, ``calibration``) and its power at the archive's noise
(``power``).
"""
