"""The distinguishing games: the engine that plays them, and the games themselves (its modules:
docs/explanation/architecture.md, layer 4, and docs/reference/api-games.md).

The reduced game of [XWW24] Figure 5 is the winner law itself (`auditsel.selection`), and the
tuning protocol over real DP-SGD is the trainer's (`auditsel.dpsgd.tuning_protocol`).
"""
