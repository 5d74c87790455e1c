"""Auditing: from the scores of a game to an epsilon lower bound, and how to plan for one (its
modules: docs/explanation/architecture.md, layer 5, and docs/reference/api-auditing.md)."""
