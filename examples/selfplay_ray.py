"""Self-play on Ray: actors play 2048 with a2pack's engine, their games are
appended to a step dataset round after round, and a learner trains on the
dataset as it grows.

    python examples/selfplay_ray.py --out /tmp/selfplay --actors 4 --games 16 --rounds 3

Each round:

1. every ``Player`` actor plays ``--games`` games with the library's engine
   (``a2pack.generate_run``: expectimax by default) and returns them as run
   rows (``a2pack.ray.runs_table``), keyed ``round/actor/game`` so that the
   dataset's order is the games', not the order the actors finish in;
2. the rows, still in the actors' object stores, become one Ray Dataset
   (``ray.data.from_arrow_refs``), which the first round builds into the
   dataset (``a2pack.ray.write_dataset``) and every later round appends to
   it (``a2pack.ray.append_dataset``: atomic, the new rows only);
3. the ``Learner`` actor takes ``--steps`` SGD steps of a softmax policy
   over the board's tile exponents, fed by one live ``a2pack.Feed``
   (``live=True``, draws with replacement) that it opened in the first
   round: ``feed.refresh()`` takes in the games appended since, and they
   join its draws at the next batch.

On a cluster, ``--out`` must be a folder every node reaches (the dataset is
appended on the driver and read by the learner). ``main()`` returns what it
did (runs, rows, the learner's loss per round); it reuses a Ray runtime that
is already up, else starts a local one.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import ray

import a2pack
import a2pack.ray as a2ray


@ray.remote
class Player:
    """Plays games with the library's engine; each game's seed comes from
    (round, actor, game), so a rerun plays the same games."""

    def __init__(self, actor: int, policy: str, max_moves: int) -> None:
        self.actor = actor
        self.options = a2pack.GenOptions(policy=policy, max_steps=max_moves)

    def play(self, round_no: int, games: int) -> Any:
        runs, keys = [], []
        for g in range(games):
            seed = (round_no * 10_000 + self.actor) * 100_000 + g
            runs.append(a2pack.generate_run(seed, self.options))
            keys.append(f"{round_no:05d}/{self.actor:04d}/{g:06d}")
        return a2ray.runs_table(runs, keys, columns=["key", "run", "num_steps", "max_score"])


@ray.remote
class Learner:
    """A softmax policy over the 16 tile exponents (numpy: no framework
    needed), trained on the dataset through a Feed."""

    def __init__(self, dataset: str, batch_size: int, lr: float, seed: int) -> None:
        self.dataset = dataset
        self.batch_size = batch_size
        self.lr = lr
        self.rng = np.random.default_rng(seed)
        self.w = np.zeros((17, 4))  # 16 exponents and a bias
        self.feed: Optional[a2pack.Feed] = None

    def train(self, steps: int) -> float:
        if self.feed is None:
            # One feed for every round: live, it follows the appends.
            self.feed = a2pack.Feed(a2pack.Dataset(self.dataset), live=True, replacement=True,
                                    batch_size=self.batch_size, seed=1, moves_dtype="int64",
                                    columns=("exponents", "moves", "legal"))
        else:
            self.feed.refresh()  # this round's games join at the next batch
        losses = []
        for _, b in zip(range(steps), self.feed):
            x = np.concatenate([np.asarray(b["exponents"], np.float64) / 16.0,
                                np.ones((len(b["moves"]), 1))], axis=1)
            y = np.asarray(b["moves"])
            logits = x @ self.w
            logits = np.where(np.asarray(b["legal"]), logits, -1e9)  # legal moves only
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            losses.append(float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean()))
            p[np.arange(len(y)), y] -= 1.0
            self.w -= self.lr * x.T @ p / len(y)
            del b  # its ring slot goes back at once
        return float(np.mean(losses))

    def rows_read(self) -> int:
        """The rows the learner's feed draws from now."""
        assert self.feed is not None
        return self.feed.refresh()


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for the dataset (made if missing)")
    ap.add_argument("--actors", type=int, default=4)
    ap.add_argument("--games", type=int, default=8, help="games per actor per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=50, help="learner steps per round")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--policy", default="expectimax", choices=["expectimax", "greedy", "random"])
    ap.add_argument("--max-moves", type=int, default=0, help="moves per game at most (0: no cap)")
    ap.add_argument("--num-cpus", type=int, default=None, help="for a local Ray runtime")
    return ap.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    args = parse(argv)
    if not ray.is_initialized():
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "dataset")
    players = [Player.remote(a, args.policy, args.max_moves) for a in range(args.actors)]
    learner = Learner.remote(path, args.batch_size, 0.5, 0)
    losses: List[float] = []
    runs = 0
    for r in range(args.rounds):
        games = ray.data.from_arrow_refs([p.play.remote(r, args.games) for p in players])
        if r == 0 and not os.path.exists(path):
            done = a2ray.write_dataset(games, path, allow_missing_branches=True,
                                       source_input="selfplay", source_kind="ray")
            runs += done["runs"]
        else:
            done = a2ray.append_dataset(games, path, allow_missing_branches=True)
            runs += done["runs_added"]
        losses.append(ray.get(learner.train.remote(args.steps)))
        print(f"round {r}: {runs} games in {path}, learner loss {losses[-1]:.3f}")
    info = a2pack.Dataset(path).info
    return {"path": path, "runs": runs, "rows": info["rows"], "losses": losses,
            "learner_rows": ray.get(learner.rows_read.remote())}


if __name__ == "__main__":
    main()
