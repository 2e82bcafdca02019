"""Reports: a window's decision rendered for people, and its rows for a team's notebooks.

One table model per view (``decision_table``), rendered for the terminal (``console``), summary.md
(``markdown``) and one self-contained report.html with its figures (``html``, ``plots``); the rule's error
rates beside the verdict (``error_rates``); the dry plan (``dryplan``); verdicts compared across windows
(``compare``); CSV and Parquet exports (``export``); the tables of the commands that are not a window
(``tables``). Nothing here decides: it reads the decision document.
"""
