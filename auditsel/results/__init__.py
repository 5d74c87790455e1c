"""Results: the one result document every route writes, and its readings.

* `fields`: result.json's upper side, lower side and interval (`upper_panel`, `upper_fields`,
  `lower_fields`, `result_interval`).
* `heuristics`: which values of a result are heuristic, which need an assumption, and which a
  result contradicts (its labels, read by every writer).
* `report`: the terminal table, report.md and the plots of a result (`write_outputs`).
* `plots`, `figures`: the figures (matplotlib, loaded only when one is drawn).
* `result`: `RunResult`, the typed view of a result document.
"""
