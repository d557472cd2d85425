"""`ai_2048`-compatible names for a2pack's packfile surface (seed 000).

Code written for upstream's PyO3 module runs unchanged on a2pack::

    import ai_2048 as a2
    r = a2.PackReader.open("dataset.a2pack")
    run = r.decode(0)                    # a2.RunV2
    for batch in r.iter_batches(batch_size=256, shuffle=True, seed=123): ...
    r.to_jsonl("runs.jsonl", parallel=True)
    print(r.stats.count, r.stats.max_len)

Only aliases live here: every name is a2pack's own class (no second
implementation). Upstream's game engine (Board, Expectimax, ...) is not part
of a2pack and is not offered. If upstream's own `ai_2048` is installed in the
same environment, whichever is first on sys.path wins.
"""

from a2pack.pack import PackReader, PackStats
from a2pack.run import Meta, RunV2, StepV2

__all__ = ["Meta", "PackReader", "PackStats", "RunV2", "StepV2"]
