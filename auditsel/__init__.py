"""auditsel: audit the privacy of differentially private hyperparameter tuning.

Upper bounds (exact curve of the released winner, and the papers' bounds), the distinguishing
game, and epsilon lower bounds from it. See README.md.
"""
__version__ = "0.1.0"
