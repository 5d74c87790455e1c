"""Audits of the tuning pipeline you already run: your code plays the game, auditsel judges it.

* `protocol`: `audit_protocol(release, score, ...)`, a per-game release function audited with
  the game engine and the lower bounds of `auditsel.auditing`.
"""
