"""The epsilon lower bounds before the one-sort change (commit 28bd174), pinned here as the
baseline of ``benchmarks/bench_audit.py`` and never imported by the package.

``lower.py`` is ``auditsel/lower.py`` at commit 28bd174 (every threshold rule and the best
threshold sort their own copy of the scores; the split takes the first ``split_fraction`` of
the trials), reformatted by ruff, with one import changed: ``gaussian_epsilon`` comes from the
sibling ``gaussian.py`` (``auditsel/mechanisms.py`` at the same commit) instead of today's
package. Self-contained (numpy, scipy and statsmodels only), so the baseline cannot drift with
today's code; ``git show 28bd174:auditsel/lower.py`` shows the original.

    from baselines.lower_per_rule_sort import lower
    lower.audit_scores(scores, member, delta, rule="split")
"""
