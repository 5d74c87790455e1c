"""DP-SGD runs per second: the batched trainer vs. the same trainer one run at a time vs. Opacus.

Every method trains the same model (logreg or MLP) on the same data (the first n digits
examples) with DP-SGD of [XWW24] eq. 1: per-example clipping to C, summed, plus N(0, C^2 sigma^2)
noise, N steps at learning rate lr, sampling rate tau (1 = full batch, the paper's setting).
All in one process, one after another; each line prints runs/second and the peak memory
above the level before it started (resident set size sampled every 2 ms on the CPU,
torch.cuda.max_memory_allocated on a GPU).

    python benchmarks/bench_dpsgd.py                       # logreg and mlp, n=500, N=20, tau=1
    python benchmarks/bench_dpsgd.py --models mlp --runs 512 --steps 50 --sample-rate 0.1

Opacus is a benchmark-only dependency (``pip install opacus``; ``--no-opacus`` skips it).
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import numpy as np
import torch

from auditsel.dpsgd.datasets import load_dataset
from auditsel.dpsgd.models import ModelSpec
from auditsel.dpsgd.trainer import (
    DiracCanary,
    Execution,
    TrainSettings,
    default_device,
    train_runs,
)


class PeakMemory:
    """Peak memory (MiB) above the starting level while the block runs."""

    def __init__(self, device):
        self.device = device
        self.peak = 0.0

    @staticmethod
    def _rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
            return self
        self.base = self._rss()
        self.top = self.base
        self.running = True

        def sample():
            while self.running:
                self.top = max(self.top, self._rss())
                time.sleep(0.002)

        self.thread = threading.Thread(target=sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            self.peak = (torch.cuda.max_memory_allocated() - self.base) / 2**20
        else:
            self.running = False
            self.thread.join()
            self.top = max(self.top, self._rss())
            self.peak = (self.top - self.base) / 2**20


def opacus_runs(spec: ModelSpec, data, runs, steps, lr, clip, sigma, tau, device):
    """``runs`` independent Opacus DP-SGD trainings (a fresh model, optimizer and engine each)."""
    import warnings

    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    warnings.filterwarnings("ignore")
    x = torch.as_tensor(data.x.reshape(len(data), -1))
    y = torch.as_tensor(data.y)
    for r in range(runs):
        torch.manual_seed(r)
        layers, sizes = [], spec.dense_sizes
        for i, (fan_in, fan_out) in enumerate(sizes):
            layers.append(torch.nn.Linear(fan_in, fan_out))
            if i < len(sizes) - 1:
                layers.append(torch.nn.ReLU())
        model = torch.nn.Sequential(*layers).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        loader = DataLoader(TensorDataset(x, y), batch_size=max(1, int(round(tau * len(data)))))
        engine = PrivacyEngine(accountant="rdp")
        model, opt, loader = engine.make_private(
            module=model,
            optimizer=opt,
            data_loader=loader,
            noise_multiplier=sigma,
            max_grad_norm=clip,
            poisson_sampling=tau < 1,
            loss_reduction="sum",
        )
        done = 0
        while done < steps:
            for xb, yb in loader:
                xb, yb = xb.to(device), yb.to(device)
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xb), yb, reduction="sum")
                loss.backward()
                opt.step()
                done += 1
                if done == steps:
                    break


def measure(label, fn, runs, device):
    with PeakMemory(device) as mem:
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t
    rate = runs / dt
    print(
        f"  {label:<28} {runs:>5} runs  {dt:8.2f} s  {rate:9.1f} runs/s  peak +{mem.peak:7.1f} MiB",
        flush=True,
    )
    return rate


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["logreg", "mlp"])
    ap.add_argument("--n", type=int, default=500, help="training examples (digits)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--sample-rate", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=256, help="runs of the batched trainer")
    ap.add_argument("--loop-runs", type=int, default=16, help="runs one at a time / Opacus")
    ap.add_argument("--batch", type=int, default=256, help="runs per batched call")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--no-opacus", action="store_true")
    ap.add_argument("--device", default=None)
    args = ap.parse_args(argv)

    device = torch.device(args.device) if args.device else default_device()
    data = load_dataset("digits", n=args.n)
    lr, clip, sigma, tau = 1e-3, 1.0, 1.0, args.sample_rate
    print(
        f"device={device} threads={torch.get_num_threads()} torch={torch.__version__} "
        f"data=digits n={len(data)} steps={args.steps} tau={tau} clip={clip} sigma={sigma}"
    )
    for kind in args.models:
        spec = ModelSpec(kind, data.shape, 10, hidden=(args.hidden,))
        print(f"{kind}: d={spec.num_params}")
        common = dict(
            settings=TrainSettings(
                steps=args.steps, lr=lr, clip=clip, noise_multiplier=sigma, sample_rate=tau
            ),
            canary=DiracCanary(),
            execution=Execution(device=device),
        )
        train_runs(spec, data, seeds=np.arange(4), **common)  # warm-up

        def batched():
            for s in range(0, args.runs, args.batch):
                seeds = np.arange(s, min(args.runs, s + args.batch))
                train_runs(spec, data, seeds=seeds, include_canary=seeds % 2 == 0, **common)

        def loop():
            for s in range(args.loop_runs):
                train_runs(spec, data, seeds=[s], include_canary=[s % 2 == 0], **common)

        rates = {
            "batched": measure(f"batched (x{args.batch})", batched, args.runs, device),
            "loop": measure("one at a time", loop, args.loop_runs, device),
        }
        if not args.no_opacus:
            try:  # warm-up (imports, first make_private) outside the timing
                opacus_runs(spec, data, 1, 2, lr, clip, sigma, tau, device)
                rates["opacus"] = measure(
                    "opacus",
                    lambda: opacus_runs(
                        spec, data, args.loop_runs, args.steps, lr, clip, sigma, tau, device
                    ),
                    args.loop_runs,
                    device,
                )
            except ImportError:
                print("  opacus: not installed (pip install opacus)")
        line = f"  ratio batched/loop = {rates['batched'] / rates['loop']:.1f}x"
        if "opacus" in rates:
            line += (
                f", batched/opacus = {rates['batched'] / rates['opacus']:.1f}x"
                f", loop/opacus = {rates['loop'] / rates['opacus']:.1f}x"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
