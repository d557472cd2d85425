import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def fixture_path() -> pathlib.Path:
    """The upstream fixture: $A2PACK_FIXTURE, else its default place beside the repository."""
    env = os.environ.get("A2PACK_FIXTURE")
    return pathlib.Path(env) if env else REPO.parent / "shared" / "fixtures" / "example.a2run2"


@pytest.fixture
def fixture_bytes() -> bytes:
    p = fixture_path()
    if not p.exists():
        raise FileNotFoundError(f"upstream fixture missing: {p} (set A2PACK_FIXTURE)")
    return p.read_bytes()


@pytest.fixture
def fixture_file() -> pathlib.Path:
    return fixture_path()
