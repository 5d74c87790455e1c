"""The adversary: it sees only what the tuning protocol releases, plus public knowledge.

Nothing in this package reads the trainer's coins or internal state; auditsel's trainer side
(auditsel.selection, auditsel.dpsgd) never imports it.
"""
