"""Auditing: from the scores of a game to an epsilon lower bound, and how to plan for one.

* `lower`: threshold rules and the valid eps_L of [XWW24] eq. 4 (Clopper-Pearson).
* `estimators`: the estimator panel (every estimator the field uses, each labelled).
* `validity`: coverage of the lower bounds (how often eps_L exceeds the truth).
* `one_run`: one-run analyses ([SNJ23], [MMC24]).
* `plan`: how many games a valid audit needs, and what n games can certify.
* `scores`: score files (CSV or .npz) for `auditsel audit-scores`.
"""
