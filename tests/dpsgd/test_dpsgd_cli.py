"""`auditsel run` with game.kind: dpsgd: real DP-SGD tuning games, checkpoints, bad settings."""

import json

import pytest
import yaml

from auditsel.cli import main

pytest.importorskip("torch")
pytest.importorskip("sklearn")

CONFIG = {
    "name": "dp",
    "delta": 1e-5,
    "base": {"kind": "dpsgd", "noise_multiplier": 2.0, "steps": 5, "sample_rate": 1.0},
    "rounds": {"kind": "tnb", "eta": 0.0, "nu": 0.2},
    "game": {
        "kind": "dpsgd",
        "threat": "etcv",
        "canary": "dirac",
        "dataset": "digits",
        "model": "logreg",
        "train_size": 60,
        "trials": 48,
        "chunk_size": 8,
        "learning_rates": [0.01, 0.1],
    },
}


def write(tmp_path, config):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow  # a DP-SGD game through the CLI, killed and resumed
def test_dpsgd_game_runs_resumes_and_is_seeded(tmp_path):
    path = write(tmp_path, CONFIG)
    out = tmp_path / "o"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    first = json.loads((out / "result.json").read_text())
    low = first["lower"]
    assert low["game"] == "dpsgd" and low["trials"] == 48 and low["proxy"] == "lambda_a"
    assert len(list((out / "checkpoints").glob("chunk_*.npz"))) == 6
    # drop two chunks (an interrupted run) and rerun: the same numbers, no chunk counted twice
    for name in ("chunk_0000002.npz", "chunk_0000005.npz"):
        (out / "checkpoints" / name).unlink()
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "result.json").read_text())["lower"] == low
    # a different job count gives the same numbers
    out2 = tmp_path / "o2"
    assert main(["run", str(path), "--out", str(out2), "--jobs", "2", "--quiet"]) == 0
    assert json.loads((out2 / "result.json").read_text())["lower"] == low


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"game.clip": 0}, "game.clip"),
        ({"game.clip": -1}, "game.clip"),
        ({"base.noise_multiplier": -1.0}, "base.noise_multiplier"),
        ({"base.sample_rate": 1.5}, "base.sample_rate"),
        ({"base.sample_rate": 0.0}, "base.sample_rate"),
        ({"game.learning_rates": []}, "game.learning_rates"),
        ({"game.dataset": "imagenet"}, "game.dataset"),
        ({"game.dataset": "mnist"}, "game.data_dir"),
        ({"game.dataset": "cifar10", "game.data_dir": "/nonexistent/cifar"}, "game.data_dir"),
        ({"game.threat": "xyz"}, "game.threat"),
        ({"game.canary": "poison"}, "game.canary"),
        ({"game.proxy": "sample"}, "game.proxy"),
        ({"game.model": "resnet"}, "game.model"),
        ({"base.kind": "gaussian", "base.mu": 1.0}, "game.kind"),
    ],
)
def test_bad_dpsgd_settings(tmp_path, capsys, changes, field):
    config = json.loads(json.dumps(CONFIG))
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        config[section][key] = value
    if config["base"]["kind"] == "gaussian":
        config["base"] = {"kind": "gaussian", "mu": 1.0}
    out = tmp_path / "o"
    assert main(["run", str(write(tmp_path, config)), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    # one line, and the field it names is exactly the one that was broken
    assert len(err.splitlines()) == 1 and f": {field}: " in err, err
    assert not out.exists()
