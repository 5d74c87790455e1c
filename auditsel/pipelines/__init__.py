"""Audits of the tuning pipeline you already run: your code plays the game, auditsel judges it.

* `pipeline`: `audit_pipeline(Pipeline(tune, score, data=..., canary=...), *, games, delta,
  ...)`, the game played around your whole tuning run, one seeded stream per game, with
  checkpoints fingerprinted by your code.
* `canaries`: `InputCanary(x, y)` and `GradientCanary(coordinate=i)` (Opacus `attach`, or
  `step` in a hand-written DP-SGD loop), each with a default score that reads the release.
* `default_canaries`: `canary="both"`, an InputCanary and a GradientCanary chosen from the
  data and a probe run (audited and planned together, Bonferroni).
* `opacus`: `from_opacus(privacy_engine, ...)`, the run's DpsgdBase and Opacus's own claimed
  epsilon, with the tuning bounds of your law of K.
* `plan`: `plan_pipeline(...)`, the games an audit needs, from a pilot.
* `load`: MODULE:NAME references and pipeline YAML files (the CLI's `audit-pipeline`).
* `protocol`: `audit_protocol(release, score, ...)`, a per-game release function audited with
  the game engine and the lower bounds of `auditsel.auditing`.
* `user_code`: the boundary around your code (your exceptions are exit 2 with your
  traceback), your files imported by path, and the source files your code runs from.
* `content_digest`: fingerprints of data and canaries by content (arrays, tensors, datasets,
  nested containers), stable across processes.
* `replay_check`: reproducibility checked before the games (unseeded randomness, in-place
  mutation, global generators under threads, thread races), refused unless accepted.
"""
