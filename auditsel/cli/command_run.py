"""`auditsel run [CONFIG] [--out DIR] [--trials N] [--seed S] [--jobs J]`: one experiment (or a
sweep) from a config.

Contract: the config is read and validated before anything is written (a bad field is one line,
exit 2); `--trials`/`--seed` override `game.trials`/`game.seed` within the config's ranges; the
output folder is claimed (resolved, refused when it escapes, locked against a second run, and on
failure only what this run created is removed: `auditsel.files`); the same seed gives the same
numbers for any `--jobs` or backend.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditsel.cli.exit_status import UsageError
from auditsel.cli.option_types import (
    DEFAULT_OUT,
    SEED_RANGE,
    TRIALS_RANGE,
    int_option,
    jobs_option,
    nonnegative_float,
)
from auditsel.errors import ConfigError
from auditsel.executor import BACKENDS
from auditsel.files import claim_folder

if TYPE_CHECKING:
    from auditsel.experiments.config import ExperimentSpec

NAME = "run"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    run: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="run one experiment (the embedded quickstart by default)"
    )
    run.add_argument("config", nargs="?", help="YAML config (default: the embedded quickstart)")
    run.add_argument(
        "--out",
        help=f"output directory (default: {DEFAULT_OUT}/<name>/, never the tracked results/)",
    )
    run.add_argument(
        "--trials", type=int_option("--trials", *TRIALS_RANGE), help="override game.trials"
    )
    run.add_argument("--seed", type=int_option("--seed", *SEED_RANGE), help="override game.seed")
    _add_execution_options(run)
    _add_output_options(run)
    return run


def _add_execution_options(run: argparse.ArgumentParser) -> None:
    """`auditsel run`'s options of where and how the game plays (never its numbers)."""
    run.add_argument(
        "--jobs",
        type=jobs_option,
        help="joblib workers (-1 = all cores; default: every core for the games played in "
        "threads, the numpy games, with no --backend; else 1); the numbers do not depend on it",
    )
    run.add_argument(
        "--backend",
        choices=BACKENDS,
        help="joblib backend for the game's chunks "
        "(default: threads for the numpy games, loky processes for DP-SGD; "
        "dask needs the dask extra)",
    )
    run.add_argument(
        "--scheduler",
        help="dask scheduler address (default: a LocalCluster on loopback with --jobs workers)",
    )
    run.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    run.add_argument(
        "--checkpoint-after",
        type=nonnegative_float("--checkpoint-after"),
        metavar="SECONDS",
        help="write the game's finished chunks once it has played this long (default 5; 0: "
        "from the first chunk); an interrupted run resumes from them",
    )


def _add_output_options(run: argparse.ArgumentParser) -> None:
    """`auditsel run`'s options of what it writes and prints."""
    run.add_argument("--quiet", action="store_true", help="do not print the table")
    run.add_argument(
        "--no-plots",
        action="store_true",
        help="write result.json and report.md only (no matplotlib: about a second less)",
    )
    run.add_argument(
        "--no-cache",
        action="store_true",
        help="compute the bounds afresh and keep nothing (by default they are kept across runs "
        "in OUT/.bounds-cache, or in $AUDITSEL_CACHE_DIR when set, and read back by the same "
        "code only)",
    )
    run.add_argument(
        "--point-plots",
        action="store_true",
        help="sweeps: also draw each point's plots (privacy_curve.png, scores.png, "
        "tradeoff.png); by default a point gets result.json and report.md, the sweep sweep.png",
    )
    run.add_argument(
        "--assume",
        choices=("monotone_score",),
        help="monotone_score: also print [XWW24]'s reduced-game epsilon, which holds only under "
        "its monotone-score assumption (the table's interval holds for any score)",
    )


def _no_game(overrides: dict[str, int], config_path: Path) -> UsageError:
    return UsageError(
        f"--{next(iter(overrides))}: {config_path} has no game section; add one or drop the option"
    )


def run(args: argparse.Namespace) -> int:
    """Run the experiment (or sweep) `args.config` names; 0 on success."""
    # deferred: the subcommand's modules load when it runs (`auditsel --help` stays fast)
    from auditsel.experiments.config import default_config_path, parse_config
    from auditsel.experiments.sweep import expand_sweep
    from auditsel.files.safe_yaml import read_yaml

    config_path = Path(args.config) if args.config else default_config_path()
    overrides = {k: v for k, v in (("trials", args.trials), ("seed", args.seed)) if v is not None}
    points = spec = None
    try:
        raw = read_yaml(config_path)
        if isinstance(raw, dict) and "sweep" in raw:
            if overrides and not isinstance(raw.get("game"), dict):
                raise _no_game(overrides, config_path)
            points = expand_sweep(raw, overrides)
            name = points[0].spec.name
        else:
            spec = parse_config(raw)
            if overrides:
                if spec.game is None:
                    raise _no_game(overrides, config_path)
                spec = spec.with_game(**overrides)
            name = spec.name
    except ConfigError as err:
        raise UsageError(f"{config_path}: {err}") from None
    if args.scheduler and args.backend != "dask":
        raise UsageError("--scheduler: only used with --backend dask; add --backend dask")
    if getattr(args, "assume", None) and points is not None:
        raise UsageError(
            "--assume: prints one setting's epsilon, not a sweep's (sweep.csv has the "
            "<key>_monotone_score columns); drop the option"
        )
    out = args.out if args.out is not None else Path(DEFAULT_OUT) / name
    with claim_folder(out, field="--out") as folder:
        progress = not args.no_progress and sys.stderr.isatty()
        return _run_into(args, folder.path, spec, points, progress)


def _run_into(
    args: argparse.Namespace,
    out_dir: Path,
    spec: ExperimentSpec | None,
    points: list[Any] | None,
    progress: bool,
) -> int:
    """Run the experiment, or the sweep's points (sweep.csv, sweep.md, sweep.png, a folder per
    point), into `out_dir`, and print its table unless --quiet; 0."""
    from auditsel.executor import execution_backend  # deferred: `auditsel --help` stays fast
    from auditsel.experiments.bounds_cache import cache_folder
    from auditsel.experiments.experiment import ExperimentOutputs, run_experiment
    from auditsel.experiments.sweep import run_sweep
    from auditsel.results.plots import prefetch_plotting

    # no --jobs: the game's default (`games.engine.default_jobs`); a sweep's points, 1
    jobs = args.jobs if args.jobs is not None or points is None else 1
    workers = 2 if jobs == -1 else abs(jobs) if jobs is not None else 1
    with execution_backend(args.backend, args.scheduler, workers=workers) as backend:
        if points is not None:
            run_sweep(points, out_dir, jobs or 1, progress, backend, point_plots=args.point_plots)
            if not args.quiet:
                print((out_dir / "sweep.md").read_text())
                print(
                    f"wrote {out_dir / 'sweep.csv'}, {out_dir / 'sweep.md'}, "
                    f"{out_dir / 'sweep.png'} and {len(points)} point folders"
                )
            return 0
        assert spec is not None  # a config without a sweep
        outputs = ExperimentOutputs(
            # matplotlib is imported in a thread meanwhile
            prefetch=None if args.no_plots else prefetch_plotting,
            defer_panel=True,
            bounds_cache=None if args.no_cache else cache_folder(out_dir),
            figure_data=not args.no_plots,  # the trade-off curve computed beside the game
        )
        result, artefacts = run_experiment(
            spec,
            out_dir,
            jobs=jobs,
            progress=progress,
            backend=backend,
            checkpoint_after=args.checkpoint_after,
            outputs=outputs,
        )
    return _write_and_print(args, out_dir, spec, result, artefacts)


def _write_and_print(
    args: argparse.Namespace,
    out_dir: Path,
    spec: ExperimentSpec,
    result: dict[str, Any],
    artefacts: dict[str, Any],
) -> int:
    """The resumed chunks (stderr), the files written, the table unless --quiet; 0."""
    from auditsel.results.report import text_table, write_outputs  # deferred: fast --help

    record = artefacts.get("record")
    if record is not None and record.resumed_chunks:
        assert spec.game is not None
        chunks = -(-spec.game.trials // spec.game.chunk_size)
        print(
            f"auditsel: resumed {record.resumed_chunks} of {chunks} chunks from "
            f"{out_dir / 'checkpoints'}",
            file=sys.stderr,
        )
    written = write_outputs(out_dir, result, artefacts, plots=not args.no_plots)
    if not args.quiet:
        print(text_table(result))
        if getattr(args, "assume", None):
            from auditsel.accounting.interval import tuning_epsilon  # deferred: fast --help

            print(tuning_epsilon(spec.base, spec.rounds, spec.delta, assume=args.assume))
        print(f"wrote {', '.join(str(p) for p in written)}")
    return 0
