"""Trainer side of real DP-SGD ([XWW24] Sec. 4): data sets, batched models, the DP-SGD trainer
of eq. 1 and the tuning protocol H of Algorithm 2 as a game protocol.

This package never imports the adversary (``attacks``): the adversary sees only what
``DpsgdTuningProtocol.release`` returns.
"""
