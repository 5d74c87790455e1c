"""The names a DP-SGD game may use: threat models, canaries, models and proxies.

Plain data, importable without torch: the config layer checks a config against these names
before anything heavy loads, and ``attacks.dpsgd_game`` and ``attacks.dpsgd_proxies`` read them
from here (one list each).
"""

__all__ = ["THREAT_NAMES", "CANARY_NAMES", "INPUT_CANARIES", "MODEL_NAMES", "DPSGD_PROXIES"]

THREAT_NAMES = ("ntnv", "ntcv", "etcv")  # [XWW24] Table 2
CANARY_NAMES = ("dirac", "input")
INPUT_CANARIES = ("inverted", "constant", "noise", "checkerboard", "mislabelled")
MODEL_NAMES = ("logreg", "mlp", "cnn")
DPSGD_PROXIES = ("lambda_a", "lambda_b", "likelihood_ratio")  # attacks.dpsgd_proxies
