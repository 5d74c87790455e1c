"""The adversary: it sees only what the tuning protocol releases, plus public knowledge.

Nothing in this package reads the trainer's coins or internal state; auditsel's trainer side
(auditsel.selection, auditsel.dpsgd) never imports it.
"""

# auditsel's package first. Its eager __init__ imports modules that import this package's
# proxies and DP-SGD game, and those import auditsel's lower layers: without this line a
# program whose first import is e.g. `attacks.proxies` would reach it again, half-made, through
# auditsel's package (tests/test_layers.py: test_each_adversary_module_imports_first).
import auditsel  # noqa: F401
