"""Experiments: a config in, a result out (the flow behind `auditsel run`).

* `config`: YAML -> a frozen, validated spec.
* `experiment`: spec -> bounds, game and audit -> result dict (result.json; its fields, labels
  and writers are `auditsel.results`'s).
* `sweep`: a grid over any config field, one result per point and a combined table.
* `one_run`: `game.one_run` in a config (r one-run audits of the tuning setting).
* `plan`: `auditsel plan CONFIG` (the configured game's trade-off curve and plan).
"""
