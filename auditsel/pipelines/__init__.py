"""Audits of the tuning pipeline you already run: your code plays the game, auditsel judges it
(its modules: docs/explanation/architecture.md, layer 8, and docs/reference/api-applications.md)."""
