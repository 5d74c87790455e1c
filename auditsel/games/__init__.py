"""The distinguishing games: the engine that plays them, and the games themselves.

* `engine`: chunked, seeded, resumable play of any protocol ([XWW24] Algorithm 1): one coin per
  game, scores and coins out, checkpoints in `DIR/checkpoints/`; where chunks run (threads, loky
  processes, a dask cluster) is `auditsel.executor`'s, and the numbers never depend on it.
* `worst_case`: the worst-case DP-SGD game with Poisson subsampling.
* `one_run`, `one_run_dpsgd`: one-run games with m canaries ([SNJ23], [MMC24]), reduced and on
  real DP-SGD.

The reduced game of [XWW24] Figure 5 is the winner law itself (`auditsel.selection`), and the
tuning protocol over real DP-SGD is the trainer's (`auditsel.dpsgd.tuning_protocol`).
"""
