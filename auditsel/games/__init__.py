"""The distinguishing games: the engine that plays them, and the games themselves.

* `engine`: chunked, seeded, resumable play of any protocol ([XWW24] Algorithm 1).
* `worst_case`: the worst-case DP-SGD game with Poisson subsampling.
* `one_run_reduced`, `one_run_dpsgd`: one-run games with m canaries ([SNJ23], [MMC24]).
* `fingerprint`, `played_score`: code identities of checkpoints; the tuning score a game plays.

The reduced game of [XWW24] Figure 5 is the winner law itself (`auditsel.selection`), and the
tuning protocol over real DP-SGD is the trainer's (`auditsel.dpsgd.tuning_protocol`).
"""
