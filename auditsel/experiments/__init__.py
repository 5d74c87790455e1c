"""Experiments: a config in, a result out (the flow behind `auditsel run`).

* `config`: YAML -> a frozen, validated spec.
* `experiment`: spec -> bounds, game and audit -> result dict (result.json).
* `report`: terminal table, report.md and plots of a result.
* `sweep`: a grid over any config field, one result per point and a combined table.
* `heuristics`: which values of a result are heuristic, and which a result contradicts.
* `one_run`: `game.one_run` in a config (r one-run audits of the tuning setting).
* `plan`: `auditsel plan CONFIG` (the configured game's trade-off curve and plan).
"""
