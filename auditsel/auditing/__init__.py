"""Auditing: from the scores of a game to an epsilon lower bound, and how to plan for one.

* `lower`: threshold rules applied, the valid eps_L of [XWW24] eq. 4 (`audit_scores`).
* `clopper_pearson`: the Clopper-Pearson limits, exact and cheaply bounded.
* `sorted_scores`: the one sort of an audit, counts at thresholds, pilots of splits.
* `threshold_search`: eq. 4 and the exact best threshold (branch and bound).
* `gdp_fitting`: the GDP fit (heuristic) and its goodness-of-fit check.
* `streamed_audit`: `audit_chunks`, audits of checkpointed chunks in bounded memory.
* `estimators`: the estimator panel (every estimator the field uses, each labelled).
* `validity`: coverage of the lower bounds (how often eps_L exceeds the truth).
* `one_run_analysis`: one-run analyses ([SNJ23], [MMC24]).
* `planning`: how many games a valid audit needs, and what n games can certify.
* `scores`: score files (CSV or .npz) for `auditsel audit-scores`.
"""
