"""What is particular to the numba backend (its kernels are compared with portable in tests/kernels)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from llamay.ggml_types import GGMLType
from llamay.model import load_model
from tests import paths

numba = pytest.importorskip("numba")
np = pytest.importorskip("numpy")

from numba.core.caching import FunctionCache  # noqa: E402
from numba.core.registry import CPUDispatcher  # noqa: E402

import llamay.native.kernels as kernels_pkg  # noqa: E402
from llamay.native.numba_backend import NumbaBackend, available_cores  # noqa: E402

pytestmark = pytest.mark.native_only

REQUIRED = {
    GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1,
    GGMLType.Q8_0, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K, GGMLType.IQ4_NL,
}  # fmt: skip


def _dispatchers():
    for info in pkgutil.iter_modules(kernels_pkg.__path__):
        mod = importlib.import_module(f"{kernels_pkg.__name__}.{info.name}")
        for name, obj in vars(mod).items():
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == mod.__name__:
                yield f"{info.name}.{name}", obj


def test_every_kernel_is_cached_and_strict():
    found = dict(_dispatchers())
    assert len(found) > 40
    for name, d in found.items():
        assert isinstance(d._cache, FunctionCache), f"{name} is not compiled with cache=True"
        assert not d.targetoptions.get("fastmath"), f"{name} uses fastmath"


def test_runnable_types():
    assert NumbaBackend.runnable_types >= REQUIRED


def _small_matmul(be):
    out, x = be.alloc_f32(2), be.alloc_f32(64)
    w = be.bind("w", GGMLType.F32, (64, 2), memoryview(bytes(4 * 128)))
    be.matmul(out, w, x, 1)


def test_set_threads(monkeypatch):
    be = NumbaBackend()
    be.policy.small_work = 0
    assert be.set_threads(1) == 1
    _small_matmul(be)
    assert numba.get_num_threads() == 1
    assert be.set_threads(10_000) == min(available_cores(), numba.config.NUMBA_NUM_THREADS)
    _small_matmul(be)
    assert numba.get_num_threads() == be.n_threads
    assert be.set_threads(0) == 1
    monkeypatch.setenv("LLAMAY_THREADS", "1")
    monkeypatch.setenv("LLAMAY_PARALLEL_MIN_WORK", "123")
    be = NumbaBackend()
    assert (be.n_threads, be.policy.small_work) == (1, 123)


def test_small_kernels_run_on_one_thread():
    be = NumbaBackend()
    be.set_threads(available_cores())
    be.policy.small_work = 10**12
    _small_matmul(be)
    assert numba.get_num_threads() == 1


def _run_policy(p, durations):
    """Small kernels through the policy, each taking the next of `durations` where it runs on all threads (the
    fake clock); returns the thread count each got."""
    small = p.small_work
    counts = []
    for d in durations:
        counts.append(p.threads(small))
        if counts[-1] > 1:
            p.observe(d)
    return counts


def _hiccups(th, n, calm=None):
    """n hiccups (one stall each) spread over less than a window, then `calm` quick kernels."""
    gap = th.WINDOW // (2 * n)
    one = [th.STALL_S] + [1e-5] * (gap - 1)
    return one * n + [1e-5] * (th.WINDOW if calm is None else calm)


def test_thread_policy_backs_off_when_threads_stall():
    from llamay.native import numba_backend as th

    p = th.ThreadPolicy(2)
    small, big = th.SMALL_WORK, th.BIG_WORK
    assert (p.threads(small - 1), p.threads(small), p.threads(big)) == (1, 2, 2)
    spread = ([th.STALL_S] + [1e-5] * (th.WINDOW // 2 - 1)) * 4  # occasional stalls, spread out: no back-off
    assert _run_policy(p, spread) == [2] * len(spread)
    assert p.back_offs == 0
    counts = _run_policy(p, _hiccups(th, th.STALLS))
    assert p.back_offs == 1
    start = counts.index(1)  # right after the third hiccup: one thread for BACK_OFF_MIN kernels, then all again
    assert counts[start : start + th.BACK_OFF_MIN + 1] == [1] * th.BACK_OFF_MIN + [2]
    assert counts.count(1) == th.BACK_OFF_MIN
    assert p.threads(big) == 2
    assert th.ThreadPolicy(1).threads(big) == 1


def test_thread_policy_one_burst_is_one_hiccup():
    """Another process waking for a few milliseconds delays the kernels of its burst: however many, they count
    once, so a burst never halves the threads (they backed off for a hundred decode steps on an idle machine)."""
    from llamay.native import numba_backend as th

    p = th.ThreadPolicy(2)
    burst = [10 * th.STALL_S] * (th.HICCUP - 1) + [1e-5] * th.WINDOW
    assert _run_policy(p, burst * 2) == [2] * (2 * len(burst))  # two bursts a window apart
    assert p.back_offs == 0


def test_thread_policy_backs_off_longer_while_stalls_go_on():
    """A machine that stays busy: each back-off that follows soon after the last doubles, up to BACK_OFF_MAX; one
    after a calm stretch starts again from BACK_OFF_MIN."""
    from llamay.native import numba_backend as th

    p = th.ThreadPolicy(2)
    want = [min(th.BACK_OFF_MIN << i, th.BACK_OFF_MAX) for i in range(10)]
    lengths = []
    for n in want:  # stalls again soon after all threads are back
        counts = _run_policy(p, _hiccups(th, th.STALLS, calm=n + 1))
        lengths.append(counts.count(1))
        assert counts[-1] == 2
    assert lengths == want and lengths[-1] == th.BACK_OFF_MAX
    _run_policy(p, [1e-5] * (th.RELAPSE + 1))  # calm
    assert _run_policy(p, _hiccups(th, th.STALLS)).count(1) == th.BACK_OFF_MIN
    assert p.back_offs == 11


def test_a_kernels_first_call_is_no_stall():
    """A kernel's first call loads it from numba's cache (or compiles it): however long, it is not counted as a
    stalled thread; later slow calls are (three hiccups of them: a back-off)."""
    import time

    from llamay.native import numba_backend as th

    be = NumbaBackend()
    be.set_threads(2)
    if be.n_threads < 2:
        pytest.skip("one core: no parallel kernels")
    work = th.SMALL_WORK

    def slow() -> None:
        time.sleep(2 * th.STALL_S)

    def quick() -> None:
        pass

    kernels = [lambda: slow(), lambda: slow(), lambda: slow()]  # three distinct kernels
    be._parallel(quick, work)
    for k in kernels:
        be._parallel(k, work)
    assert be.policy.back_offs == 0
    for k in kernels:
        for _ in range(th.HICCUP):  # three hiccups, not one burst
            be.policy.observe(0.0)
        be._parallel(k, work)
    assert be.policy.back_offs == 1


def test_threads_apply_in_other_python_threads():
    """numba's thread count is per Python thread: the backend sets it where its kernels run."""
    import threading

    be = NumbaBackend()
    be.policy.small_work = 0
    be.set_threads(1)
    seen = []

    def work():
        _small_matmul(be)
        seen.append(numba.get_num_threads())

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [1]


def test_bind_is_zero_copy():
    with load_model(paths.stories("q4_0"), NumbaBackend()) as model:
        whole_file = np.frombuffer(model.file.raw_bytes(0, model.file.size), np.uint8)
        embd = model.weights.token_embd.handle.data
        wq = model.weights.layers[0].attn.q.handle.data
        assert np.shares_memory(embd, whole_file) and np.shares_memory(wq, whole_file)
        assert not embd.flags.owndata


def test_repacked_strips_are_the_weights_size_and_can_be_turned_off(monkeypatch):
    """Q4_0 matrices are repacked in strips of eight rows, byte for byte as large as the file's blocks (the
    file's bytes stay mapped for get_rows); LLAMAY_REPACK=0 keeps ggml's row layout and vec_dot order."""
    with load_model(paths.stories("q4_0"), NumbaBackend()) as model:
        h = model.weights.layers[0].attn.q.handle
        assert h.strips is not None and h.strips.nbytes == h.data.nbytes
    monkeypatch.setenv("LLAMAY_REPACK", "0")
    with load_model(paths.stories("q4_0"), NumbaBackend()) as model:
        assert model.weights.layers[0].attn.q.handle.strips is None


def test_unsupported_type_is_refused_by_name():
    from llamay.errors import UnsupportedTypeError

    with pytest.raises(UnsupportedTypeError, match="IQ2_XXS"):
        NumbaBackend().bind("w", GGMLType.IQ2_XXS, (256, 1), memoryview(bytes(66)))


def test_greedy_text_matches_portable_on_stories():
    from llamay.generate import generate
    from llamay.sampling import Sampler, SamplerConfig

    texts = []
    for be in (NumbaBackend(), "portable"):
        with load_model(paths.stories("f32"), be) as model:
            st = model.new_state(n_ctx=64)
            ids = model.tokenizer.encode("Once upon a time")
            out = list(generate(model, st, ids, 24, Sampler(SamplerConfig(temperature=0))))
            texts.append(model.tokenizer.decode(out))
    assert texts[0] == texts[1]
    assert texts[0].startswith(", there was a little girl named Lily.")


@pytest.mark.parametrize("t", sorted(NumbaBackend.runnable_types), ids=lambda t: t.name)
@pytest.mark.parametrize(("n", "n_out"), [(4, 2), (9, 33), (13, 70), (13, 72)])
def test_batched_matmul_equals_portable_and_row_by_row(t, n, n_out):
    """Batches of TILE_TOKENS tokens or more take the panel path: compare it with portable and with the
    one-token path, with a remainder of tokens and an odd number of rows (72 rows: the repacked strips)."""
    import random

    from llamay.ggml_types import block_size
    from llamay.kernels import get_backend
    from tests.kernels.data import floats, weight_bytes
    from tests.kernels.test_kernels import close

    rng = random.Random(f"batched/{t.name}/{n}")
    n_in = 2 * max(block_size(t), 64)
    data = weight_bytes(rng, t, n_in, n_out)
    x = floats(rng, n * n_in)
    x[n_in : n_in + 32] = floats(rng, 32, 0.0)
    be, ref = NumbaBackend(), get_backend("portable")
    w = be.bind("w", t, (n_in, n_out), memoryview(data))
    out = be.alloc_f32(n * n_out)
    be.matmul(out, w, np.asarray(x, np.float32), n)
    rows = be.alloc_f32(n * n_out)
    for i in range(n):
        one = be.alloc_f32(n_out)
        be.matmul(one, w, np.asarray(x[i * n_in : (i + 1) * n_in], np.float32), 1)
        rows[i * n_out : (i + 1) * n_out] = one
    want = ref.alloc_f32(n * n_out)
    ref.matmul(want, ref.bind("w", t, (n_in, n_out), memoryview(data)), x, n)
    close(out.tolist(), want.tolist(), 5e-5, f"{t.name} batched")
    close(out.tolist(), rows.tolist(), 2e-6, f"{t.name} batched vs row by row")


def _ties_row(n: int) -> list[float]:
    """Blocks whose quants fall on .5 exactly (amax 127: the inverse scale is 1), then random values."""
    import random

    rng = random.Random(5)
    row = []
    for b in range(n // 32):
        if b % 3 == 0:
            row += [127.0] + [((j % 9) - 4) + 0.5 for j in range(31)]
        elif b % 3 == 1:
            row += [0.0] * 32
        else:
            row += [rng.gauss(0.0, 1.0) for _ in range(32)]
    return row


@pytest.mark.parametrize("vdt", ["Q8_0", "Q8_1", "Q8_K", "F16", "BF16"])
def test_activation_rounding_is_bit_identical_to_portable(vdt):
    from array import array

    from llamay.kernels.activations import round_row
    from llamay.native.kernels import activations as act

    n_in, n = 512, 3
    rows = [_ties_row(n_in), [v * 1e-3 for v in _ties_row(n_in)][::-1], [(-1) ** j * j / 7 for j in range(n_in)]]
    x = np.asarray([v for r in rows for v in r], np.float32)
    xq = np.zeros(n * n_in, np.int8)
    if vdt in ("Q8_0", "Q8_1"):
        xd, xs = np.zeros(n * n_in // 32, np.float32), np.zeros(n * n_in // 32, np.float32)
        act.quantize_q8(x, n, n_in, xq, xd, xs)
        got = (xq.reshape(-1, 32) * xd[:, None]).astype(np.float32).reshape(-1)
    elif vdt == "Q8_K":
        kd, bsum = np.zeros(n * n_in // 256, np.float32), np.zeros(n * n_in // 16, np.int32)
        act.quantize_q8_k(x, n, n_in, xq, kd, bsum)
        got = (xq.reshape(-1, 256).astype(np.float32) * kd[:, None]).reshape(-1)
        assert (bsum == xq.reshape(-1, 16).sum(axis=1)).all()
    else:
        got = np.zeros_like(x)
        (act.round_f16_rows if vdt == "F16" else act.round_bf16_rows)(x, len(x), got)
    want = array("f", bytes(4 * len(x)))
    for i in range(n):
        out = array("f", bytes(4 * n_in))
        round_row(getattr(GGMLType, vdt), array("f", x[i * n_in : (i + 1) * n_in].tobytes()), out)
        want[i * n_in : (i + 1) * n_in] = out
    assert got.tobytes() == want.tobytes()
