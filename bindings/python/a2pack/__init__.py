"""a2pack: 2048 game-play data from run files to GPU batches.

A thin Python layer over liba2pack's C ABI (through cffi). Logic lives in the
C++ library; this package converts arguments, raises exceptions and hands out
numpy arrays.
"""

from ._native import __version__, abi_version, library_path, lz4_version, zstd_version
from .errors import (
    Error,
    IoError,
    NotFoundError,
    CorruptError,
    ChecksumError,
    UnsupportedError,
    OutOfRangeError,
    InvalidArgumentError,
    NoMemoryError,
    ClosedError,
    InterruptedError_,
    FullError,
    InternalError,
)
from .board import board_score, board_highest_tile, board_apply_move, board_legal_moves, board_to_grid, normalise_branches
from .run import RunV2, RunBatch, decode_batch, detect_kind, load_batch
from .gen import GenOptions, generate_run, generate_dir

# capability: pack
from .pack import PackReader, PackWriter, PackStats, PackEntry, PackBuildSummary, pack_dir
# capability: dataset
from .dataset import STEP_DTYPE, Dataset, EpochSampler, build_dataset, append_dataset, append_runs, verify_dataset
from .feed import Feed, FeedBatch, RateLimit  # the training feed (docs/training.md)
from .priorities import Priorities  # prioritized replay (docs/replay.md)
from .shards import ShardStream  # datasets larger than RAM (docs/dataset.md)
# capability: bag (the sackli-compatible API is the submodule a2pack.bag)
from . import bag
from .logger import DataLogger, LogData, LogStream, LogProblem, DecodeWarning  # capability: logger
from . import arrow  # Arrow PyCapsule interface, to_arrow / to_parquet (docs/arrow.md)
