"""The PyTorch integration: a DataLoader epoch with worker processes.

torch is a test dependency (`make test` installs it); the missing-torch
error is tested by hiding the module."""

import sys

import numpy as np
import pytest

import a2pack
from a2pack import torch_data

from test_dataset import make_run, write_runs


@pytest.fixture(scope="module")
def ds_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("torchds")
    write_runs(tmp / "runs", [make_run(s, 20 + 7 * s) for s in range(12)])
    a2pack.build_dataset(tmp / "runs", tmp / "ds")
    return tmp / "ds"


def test_clear_error_without_torch(ds_dir, monkeypatch):
    # A None entry in sys.modules makes `import torch` raise ImportError, as
    # on a machine without it (whether or not torch was imported before).
    monkeypatch.setitem(sys.modules, "torch", None)
    data = torch_data.StepBatches(ds_dir)  # constructing needs no torch
    assert len(data) == len(a2pack.Dataset(ds_dir))
    with pytest.raises(ImportError, match="needs PyTorch"):
        data[np.arange(4)]
    with pytest.raises(ImportError, match="pip install torch"):
        torch_data.make_loader(ds_dir)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_epoch(ds_dir, num_workers):
    import torch
    from torch.utils.data import DataLoader

    ds = a2pack.Dataset(ds_dir)
    steps = ds.steps
    data = torch_data.StepBatches(ds)
    sampler = torch_data.EpochBatchSampler(len(data), batch_size=64, seed=3)
    loader = DataLoader(data, sampler=sampler, batch_size=None, num_workers=num_workers)
    seen = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(loader)
        assert len(batches) == len(sampler) == -(-len(ds) // 64)
        order = []
        for bi, b in enumerate(batches):
            idx = sampler._s.batch(bi)
            rows = steps[idx]
            assert b["exponents"].dtype == torch.uint8 and b["exponents"].shape == (len(idx), 16)
            assert b["moves"].dtype == torch.int64
            assert b["legal"].dtype == torch.bool and b["legal"].shape == (len(idx), 4)
            assert b["ev_values"].dtype == torch.float32
            np.testing.assert_array_equal(b["moves"].numpy(), rows["move"])
            np.testing.assert_array_equal(b["ev_values"].numpy(), rows["ev_values"])
            order.append(idx)
        order = np.concatenate(order)
        np.testing.assert_array_equal(np.sort(order), np.arange(len(ds)))  # each row once
        seen.append(order)
    assert (seen[0] != seen[1]).any()  # epochs reshuffle

    # The same seed gives the same batches, in a fresh loader too.
    loader2, sampler2 = torch_data.make_loader(ds_dir, batch_size=64, seed=3,
                                               num_workers=num_workers)
    sampler2.set_epoch(1)
    again = np.concatenate([sampler2._s.batch(i) for i in range(len(sampler2))])
    np.testing.assert_array_equal(again, seen[1])
    first = next(iter(loader2))
    np.testing.assert_array_equal(first["moves"].numpy(), steps[sampler2._s.batch(0)]["move"])


def test_filtered_loader_with_spawned_workers(ds_dir):
    import torch.multiprocessing as mp
    from torch.utils.data import DataLoader

    ds = a2pack.Dataset(ds_dir)
    train, val = ds.split(0.25, seed=1)
    data = torch_data.StepBatches(ds_dir)
    sampler = torch_data.EpochBatchSampler(val, batch_size=32, seed=0)
    loader = DataLoader(data, sampler=sampler, batch_size=None, num_workers=2,
                        multiprocessing_context=mp.get_context("spawn"))
    got = np.concatenate([b["moves"].numpy() for b in loader])
    want = np.concatenate([ds.steps[sampler._s.batch(i)]["move"] for i in range(len(sampler))])
    np.testing.assert_array_equal(got, want)
