"""A window's verdict from its directory: decided at the close, and decided again from the stored files alone.

``fairwin decide``, ``report``, the promotion gate and the window's own close all read a window
here: what its receipts say it saw (:mod:`fairwin.verdict.observed`), the decision sealed with its
inputs and verified when read again (:mod:`fairwin.verdict.stored`), and a file of pooled rows
decided on its own (:mod:`fairwin.verdict.pooled_file`).
"""
