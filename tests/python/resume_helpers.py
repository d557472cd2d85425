"""Run a StatefulDataLoader over a2pack's samplers for test_resume.py: the
whole run in the test's process, the resumed part in a new process
(`python resume_helpers.py ARGS_JSON`), so restoring never sees the saving
process's memory."""

import json
import pickle
import sys

import numpy as np


class Ids:
    """Map-style dataset whose item is its key: the loader delivers the row
    ids the sampler chose, through workers and collation."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, key):
        import torch
        return torch.from_numpy(np.asarray(key, dtype=np.int64).copy())


def make(cfg):
    from torchdata.stateful_dataloader import StatefulDataLoader
    from a2pack import torch_data
    from a2pack.mix import MixSampler

    n = cfg["n"]
    kind = cfg["sampler"]
    if kind == "epoch":
        sampler = torch_data.EpochBatchSampler(n, batch_size=cfg["batch"], seed=7)
    elif kind == "elastic":
        sampler = torch_data.DistributedSampler(n, num_replicas=cfg["world"], rank=cfg["rank"],
                                                elastic=True, global_batch_size=cfg["batch"],
                                                seed=7)
    elif kind == "mix":
        sampler = MixSampler([np.arange(0, n, 2), np.arange(1, n, 2)], [0.75, 0.25],
                             batch_size=cfg["batch"], seed=7, num_batches=cfg["mix_batches"])
    else:
        raise ValueError(kind)
    kw = {}
    if cfg["workers"]:
        kw = dict(multiprocessing_context=cfg["context"])
    loader = StatefulDataLoader(Ids(n), sampler=sampler, batch_size=None,
                                num_workers=cfg["workers"], **kw)
    return loader, sampler


def run(cfg, start=None):
    """Batches (lists of row ids) of epochs [epoch0, epochs); saves the
    loader's state after global step cfg['k'] into cfg['state'] when not
    resuming."""
    loader, sampler = make(cfg)
    out = []
    epoch0 = 0
    if start is not None:
        loader.load_state_dict(start["loader"])
        epoch0 = start["epoch"]
    step = 0
    for epoch in range(epoch0, cfg["epochs"]):
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        for batch in loader:
            out.append(batch.tolist())
            if start is None and step == cfg["k"]:
                with open(cfg["state"], "wb") as f:
                    pickle.dump({"loader": loader.state_dict(), "epoch": epoch}, f)
            step += 1
    return out


if __name__ == "__main__":
    # `whole`: the uninterrupted run (saving the state); otherwise the resumed one.
    cfg = json.loads(sys.argv[1])
    whole = len(sys.argv) > 2 and sys.argv[2] == "whole"
    start = None
    if not whole:
        with open(cfg["state"], "rb") as f:
            start = pickle.load(f)
    with open(cfg["whole_out"] if whole else cfg["out"], "w") as f:
        json.dump(run(cfg, start), f)
