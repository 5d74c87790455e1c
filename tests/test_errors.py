"""One bad-input type: domain objects name their parameter, the config layer adds the path."""

import pickle

import pytest

from auditsel.auditing.scores import ScoreFileError
from auditsel.errors import ConfigError, choice, integer, number
from auditsel.executor import BackendError
from auditsel.experiments.config import parse_config
from auditsel.games.engine import CheckpointError
from auditsel.mechanisms import DpsgdBase, GaussianBase
from auditsel.rounds import TruncatedNegativeBinomial


def test_domain_names_the_parameter_config_adds_the_path():
    with pytest.raises(ConfigError) as err:
        GaussianBase(0.0)
    assert err.value.field == "mu" and str(err.value).startswith("mu: must be in (0, inf)")
    with pytest.raises(ConfigError) as err:
        TruncatedNegativeBinomial(0.0, 1.5)
    assert err.value.field == "nu"
    with pytest.raises(ConfigError) as err:
        DpsgdBase(1.0, 0)
    assert err.value.field == "steps"
    raw = {
        "name": "x",
        "delta": 1e-5,
        "base": {"kind": "dpsgd", "noise_multiplier": 1.0, "steps": 10, "sample_rate": 1.0},
        "rounds": {"kind": "tnb", "eta": 0, "nu": 2},
    }
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert err.value.field == "rounds.nu" and str(err.value).startswith(
        "rounds.nu: must be in (0, 1]"
    )
    raw["rounds"]["nu"] = 0.1
    raw["base"]["p"] = [0.5, 0.5]
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert err.value.field == "base.p"


def test_within_and_pickle_keep_field_and_message():
    err = ConfigError("mu", "must be > 0").within("base")
    assert (err.field, err.message, str(err)) == ("base.mu", "must be > 0", "base.mu: must be > 0")
    assert ConfigError("", "whole message").within("rounds").field == "rounds"
    for e in (
        err,
        CheckpointError("checkpoint x is corrupted"),
        BackendError("--backend: no"),
        ScoreFileError("scores.csv", "not found"),
    ):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and isinstance(back, ConfigError)


@pytest.mark.parametrize(
    "call, text",
    [
        (lambda: number(True, "x"), "x: must be a number in (-inf, inf), got True"),
        (lambda: number(float("nan"), "x", 0, 1), "x: must be in [0, 1], got nan"),
        (lambda: number(1.0, "x", 0, 1, hi_open=True), "x: must be in [0, 1), got 1.0"),
        (lambda: integer(2.5, "k", 1), "k: must be an integer in [1, inf], got 2.5"),
        (lambda: choice(1, "flag", (True, False)), "flag: must be one of true, false, got 1"),
    ],
)
def test_checkers_say_the_allowed_range(call, text):
    with pytest.raises(ConfigError) as err:
        call()
    assert str(err.value) == text


def test_checkers_return_converted_values():
    import numpy as np

    assert number(np.float32(0.5), "x", 0, 1) == 0.5 and type(number(1, "x")) is float
    assert integer(1e3, "n", 1) == 1000 and integer(np.int64(7), "n", 1) == 7
