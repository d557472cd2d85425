"""a2pack's drop-in for the upstream ai-2048 tool's Python module.

Code written for upstream's PyO3 module (`import ai_2048`) runs unchanged:
the same classes, constructors, properties, values and exceptions, all on
a2pack's C++ library. Boards, moves and scores are a2pack's engine; random
tiles and shuffles use a2pack's copy of upstream's random stream, so a seed
gives upstream's boards and orders; Expectimax is upstream's search node for
node, so its branch values equal upstream's bit for bit::

    import ai_2048 as a2
    rng = a2.Rng(42)
    b = a2.Board.empty().with_random_tile(rng=rng).with_random_tile(rng=rng)
    ai = a2.Expectimax()
    while (m := ai.best_move(b)) is not None:
        b = b.make_move(m, rng=rng)

    r = a2.PackReader.open("dataset.a2pack")
    for pre, dirs, branches in r.iter_step_batches(1024, shuffle=True, seed=7): ...

Serialization and pack errors are RuntimeError, as upstream's, and also the
a2pack error class (FileNotFoundError for a missing file, ...). The library
is loaded on first use, so `import ai_2048` stays cheap. Differences from
upstream are listed in docs/ai_2048.md. If upstream's own `ai_2048` is
installed in the same environment, whichever is first on sys.path wins.
"""

from ._board import Board, Move, Rng
from ._search import BranchEval, Expectimax, ExpectimaxConfig, SearchStats
from ._runs import BranchV2, Meta, RunV2, StepV2, normalize_branches_py
from ._pack import PackReader, PackStats, PackView
from ._steps import batch_from_steps, exps_from_boards

__all__ = [
    "Board", "BranchEval", "BranchV2", "Expectimax", "ExpectimaxConfig", "Meta", "Move",
    "PackReader", "PackStats", "PackView", "Rng", "RunV2", "SearchStats", "StepV2",
    "batch_from_steps", "exps_from_boards", "normalize_branches_py",
]
