"""The game on a dask.distributed LocalCluster (loopback) gives the numbers of a local run."""

import json

import pytest

from auditsel.cli import main
from auditsel.executor import BackendError, execution_backend


@pytest.mark.slow  # starts a dask cluster
def test_dask_local_cluster_gives_the_same_numbers(tmp_path):
    pytest.importorskip("distributed")
    local, dask = tmp_path / "local", tmp_path / "dask"
    assert main(["run", "--out", str(local), "--trials", "600000", "--quiet"]) == 0
    assert (
        main(
            [
                "run",
                "--out",
                str(dask),
                "--trials",
                "600000",
                "--jobs",
                "2",
                "--backend",
                "dask",
                "--quiet",
            ]
        )
        == 0
    )
    a, b = (json.loads((d / "result.json").read_text()) for d in (local, dask))
    assert a["lower"] == b["lower"]


def test_scheduler_without_dask_is_a_usage_error(tmp_path, capsys):
    assert (
        main(
            [
                "run",
                "--out",
                str(tmp_path / "o"),
                "--trials",
                "1000",
                "--scheduler",
                "tcp://127.0.0.1:1",
            ]
        )
        == 2
    )
    assert "--scheduler" in capsys.readouterr().err


def test_unknown_backend_is_rejected():
    with pytest.raises(BackendError):
        with execution_backend("spark"):
            pass
