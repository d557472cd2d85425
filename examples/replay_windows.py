"""A learner on windows of consecutive steps: self-play games with the
library's engine become a dataset, and a small torch sequence model trains
on 16-step windows of it drawn with replacement, the newest rows weighted by
recency, with a checkpoint taken half way and the run resumed from it.

    python examples/replay_windows.py --out /tmp/replay --games 24 --steps 60

Each round of self-play appends its games to the dataset
(``a2pack.append_dataset``: the new rows only), and the learner opens a new
feed over the grown dataset: ``window=16`` windows that never cross a run's
end, ``replacement=True`` (endless uniform draws), ``recent=`` the newest
rows only. ``main()`` returns the losses and shows that the steps after the
checkpoint are the same whether the feed was resumed or not.
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import shutil

import numpy as np
import torch

import a2pack

T = 16


class WindowPolicy(torch.nn.Module):
    """A GRU over the window's boards, predicting each step's move."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(16 * 16, 64)
        self.gru = torch.nn.GRU(64, 64, batch_first=True)
        self.head = torch.nn.Linear(64, 4)

    def forward(self, exponents: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.one_hot(exponents.long().clamp(max=15), 16)
        x = self.embed(x.flatten(-2).float())
        h, _ = self.gru(x)
        return self.head(h)


def play(folder: pathlib.Path, games: int, seed: int) -> None:
    """`games` games of the library's engine (greedy: quick) into folder."""
    a2pack.generate_dir(folder, games, seed=seed, policy="greedy")


def train(feed: a2pack.Feed, model: torch.nn.Module, opt: torch.optim.Optimizer,
          steps: int) -> list:
    losses = []
    for _ in range(steps):
        b = next(feed)
        logits = model(torch.from_numpy(b["exponents"]))
        target = torch.from_numpy(b["moves"].astype(np.int64))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 4), target.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        del b
    return losses


def open_feed(ds: a2pack.Dataset, recent: int) -> a2pack.Feed:
    return a2pack.Feed(ds, window=T, batch_size=32, replacement=True, recent=recent, seed=7,
                       columns=("exponents", "moves"), pin="off")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, required=True)
    ap.add_argument("--games", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    ds_dir = args.out / "ds"
    torch.manual_seed(0)
    model = WindowPolicy()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for r in range(args.rounds):
        games = args.out / f"games-{r}"
        play(games, args.games, seed=1000 * r)
        if r == 0:
            a2pack.build_dataset(games, ds_dir)
        else:
            a2pack.append_dataset(ds_dir, games)
        ds = a2pack.Dataset(ds_dir)
        recent = max(len(ds) // 2, 4 * T)  # the newer half of the steps
        with open_feed(ds, recent) as feed:
            losses += train(feed, model, opt, args.steps // 2)
            checkpoint = copy.deepcopy({"feed": feed.state_dict(), "model": model.state_dict(),
                                        "opt": opt.state_dict()})
            after = train(feed, model, opt, args.steps - args.steps // 2)
        # Resume from the checkpoint: the same batches, so the same losses.
        model.load_state_dict(checkpoint["model"])
        opt.load_state_dict(checkpoint["opt"])
        with open_feed(ds, recent) as feed:
            feed.load_state_dict(checkpoint["feed"])
            resumed = train(feed, model, opt, args.steps - args.steps // 2)
        losses += after
        print(f"round {r}: {len(ds)} rows, loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
              f"resumed run {'matches' if np.allclose(after, resumed) else 'DIFFERS'}")
    return {"losses": losses, "rows": len(ds), "resumed": resumed, "after": after}


if __name__ == "__main__":
    main()
