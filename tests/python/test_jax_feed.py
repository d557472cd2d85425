"""JAX over a2pack.Feed as JAX users write it: a jitted training step fed with
``jnp.from_dlpack`` of each batch's columns, for a whole epoch, with a ring
that XLA's asynchronous dispatch fills with batches still in use. The feed
waits for XLA to let a batch go instead of raising, ``hold_until`` takes what
the step returns, and the program exits 0 (the JAX arrays over the ring are
let go before the interpreter finalises) - twenty times in a row."""

import pathlib
import subprocess
import sys
import textwrap

import pytest

import a2pack

from test_dataset import make_run, write_runs

pytest.importorskip("jax")

REPO = pathlib.Path(__file__).resolve().parents[2]

TRAIN = textwrap.dedent("""
    import sys
    import jax, jax.numpy as jnp
    import numpy as np
    import a2pack

    path, depth, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ds = a2pack.Dataset(path)
    feed = a2pack.Feed(ds, batch_size=256, depth=depth, seed=depth, epochs=1,
                       moves_dtype="int32", columns=("exponents", "moves", "legal"))

    def loss(p, exps, moves, legal):
        x = jax.nn.one_hot(exps, 16).reshape(exps.shape[0], -1)
        logits = jnp.where(legal, x @ p["w"] + p["b"], -1e9)
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(moves.shape[0]), moves])

    @jax.jit
    def step(p, exps, moves, legal):
        l, g = jax.value_and_grad(loss)(p, exps, moves, legal)
        return jax.tree_util.tree_map(lambda a, d: a - 0.5 * d, p, g), l

    p0 = p = {"w": jnp.zeros((256, 4)), "b": jnp.zeros(4)}
    rows = 0
    held_out = None
    for b in feed:
        if held_out is None:  # copies, to measure the loss on after training
            held_out = [jnp.array(np.array(b[c])) for c in ("exponents", "moves", "legal")]
        p, l = step(p, jnp.from_dlpack(b["exponents"]), jnp.from_dlpack(b["moves"]),
                    jnp.from_dlpack(b["legal"]))
        if mode == "hold":
            b.hold_until((p, l))   # a pytree: what the step returned
        rows += b.rows
    before, after = float(loss(p0, *held_out)), float(loss(p, *held_out))
    assert rows == len(ds), (rows, len(ds))
    assert after < before, (before, after)
    print("ok", rows, before, after)
    # exits with the loop's JAX arrays (over the ring) still alive
""")


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jaxfeed")
    write_runs(tmp / "runs", [make_run(s, 300 + 37 * s) for s in range(12)])
    a2pack.build_dataset(tmp / "runs", tmp / "ds")
    return tmp / "ds"


def _train(ds_path, depth, mode):
    return subprocess.run([sys.executable, "-c", TRAIN, str(ds_path), str(depth), mode],
                          capture_output=True, text=True, timeout=300)


def test_a_jitted_step_trains_an_epoch_and_exits_0_twenty_times(ds_path):
    for run in range(20):
        depth = 2 + run % 3
        r = _train(ds_path, depth, "hold" if run % 2 else "plain")
        assert r.returncode == 0 and r.stdout.startswith("ok"), (
            f"run {run} (depth {depth}): exit {r.returncode}\n{r.stdout}\n{r.stderr[-2000:]}")


def test_a_consumer_that_never_lets_go_still_gets_a_clear_error(ds_path):
    ds = a2pack.Dataset(ds_path)
    feed = a2pack.Feed(ds, batch_size=64, depth=1, slots=2, held_timeout=0.2)
    kept = [next(feed), next(feed)]
    with pytest.raises(a2pack.errors.FullError, match=r"holds all 2 ring slots.*waited 0\.2 s"):
        next(feed)
    kept.pop(0)
    assert next(feed).rows == 64  # one let go: the feed goes on
    feed.close()


def test_hold_until_takes_pytrees_and_refuses_what_cannot_complete(ds_path):
    jnp = pytest.importorskip("jax.numpy")
    feed = a2pack.Feed(a2pack.Dataset(ds_path), batch_size=64, depth=1)
    b = next(feed)
    b.hold_until({"w": jnp.ones(3), "parts": [jnp.zeros(2), (jnp.ones(1),)]})
    assert len(b._pending) == 3
    with pytest.raises(TypeError, match="query\\(\\) or is_ready\\(\\)"):
        b.hold_until([1, 2.0])
    with pytest.raises(TypeError):
        b.hold_until(object())
    feed.close()
