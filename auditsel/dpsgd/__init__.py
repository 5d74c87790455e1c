"""Trainer side of real DP-SGD ([XWW24] Sec. 4): data sets, batched models, the DP-SGD trainer
of eq. 1 and the tuning protocol H of Algorithm 2 as a game protocol.

This package never imports the adversary (``attacks``): the adversary sees only what
``DpsgdTuningProtocol.release`` returns.

``RANDOM_STREAMS`` is the version of the trainer's random streams (``kernels.draw``: which
number every (seed, stream, step, index) gets). Bump it with any change that changes a drawn
number; checkpoint fingerprints record it. Version 2 is the counter-based Philox4x32-10 streams.
"""

RANDOM_STREAMS = 2
