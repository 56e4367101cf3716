"""A traced function's first calls do not wait for the system compiler: where its generated CPU
kernels are not in the build cache, they compile on a background thread while the calls replay
the graph unfused, and the calls after it is done run the fused kernels (function/fusion.py).
The compiler here waits for a flag file, so each phase is observed for sure."""
import os
import stat
import shutil

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.backends.emu import build
from tapegpu.core.options import options
from tapegpu.function import fusion

SINGLE_DEVICE = True  # the numpy target's compile (g++); GPUs compile with NVRTC, in the call

pytestmark = pytest.mark.skipif(shutil.which(build.CXX) is None or not options.fusion,
                                reason="no C++ compiler here, or fusion is off")


@pytest.fixture
def held_compiler(tmp_path, monkeypatch):
    """An empty kernel cache, and a compiler that compiles only once `release()` is called."""
    flag = tmp_path / "go"
    script = tmp_path / "cxx"
    script.write_text("#!/bin/sh\n"
                      'case "$*" in *--version*|*-dumpversion*|*-E\\ -P*) exec '
                      f'{shutil.which(build.CXX)} "$@";; esac\n'
                      # (gives up after 20 s: a compile in the call fails instead of hanging)
                      f"i=0; while [ ! -e {flag} ] && [ $i -lt 1000 ]; do sleep 0.02; "
                      "i=$((i+1)); done\n"
                      f"[ -e {flag} ] || exit 1\n"
                      f'exec {shutil.which(build.CXX)} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "CXX", str(script))
    monkeypatch.setattr(fusion, "_compiled", {})
    monkeypatch.setattr(options, "compile_in_background", True)
    yield lambda: flag.touch()
    flag.touch()  # nothing waits on it after the test
    fusion.wait_compiled()


def _kernels(fn, like):
    """The fused kernels the function's replay for arguments like `like` runs now."""
    cf = fn.get_concrete_function(tg.constant(like))
    return getattr(cf._plan.graph, "fused", [])


def _chain(x):
    y = x
    for _ in range(5):
        y = tg.sin(y) * 1.25 + 0.5
    return y * y


def test_the_first_calls_replay_unfused_until_the_kernels_are_compiled(held_compiler):
    traced = tg.function(_chain)
    xs = [np.linspace(-1, 1, 64).astype(np.float32) * k for k in (1.0, 2.0, 3.0, 0.5)]
    want = [_chain(tg.constant(x)).numpy() for x in xs]
    np.testing.assert_array_equal(traced(tg.constant(xs[0])).numpy(), want[0])  # traced eagerly
    for x, w in zip(xs[1:3], want[1:3]):  # the compiler is held: replays of the unfused graph
        np.testing.assert_array_equal(traced(tg.constant(x)).numpy(), w)
        assert _kernels(traced, x) == []
    held_compiler()
    fusion.wait_compiled()
    kernels = _kernels(traced, xs[0])
    assert len(kernels) == 1 and "sin" in kernels[0].ops
    out = traced(tg.constant(xs[3])).numpy()  # the fused kernel: within its documented ulps
    np.testing.assert_allclose(out, want[3], rtol=4 * np.finfo(np.float32).eps, atol=0)
    assert traced.experimental_get_tracing_count() == 1


def test_a_cached_kernel_is_used_from_the_first_replay(held_compiler):
    held_compiler()
    first = tg.function(_chain)
    first(tg.constant(np.ones(8, np.float32)))
    fusion.wait_compiled()
    assert len(_kernels(first, np.ones(8, np.float32))) == 1
    fusion._compiled.clear()  # as a new process: only the build cache has the kernel
    again = tg.function(_chain)
    again(tg.constant(np.ones(8, np.float32)))
    # no background job, no unfused phase
    assert len(_kernels(again, np.ones(8, np.float32))) == 1


def test_a_failing_compiler_leaves_the_function_unfused_and_says_why(held_compiler, tmp_path,
                                                                     monkeypatch):
    bad = tmp_path / "badcxx"
    bad.write_text("#!/bin/sh\n"
                   f'case "$*" in *--version*|*-E\\ -P*) exec {shutil.which("g++") or "cc"} '
                   '"$@";; esac\necho "no compiler today" >&2\nexit 1\n')
    bad.chmod(bad.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(build, "CXX", str(bad))
    monkeypatch.setattr(fusion, "_failed", {})
    traced = tg.function(_chain)
    x = np.linspace(0, 1, 16).astype(np.float32)
    traced(tg.constant(x))
    fusion.wait_compiled()
    np.testing.assert_array_equal(traced(tg.constant(x + 1)).numpy(),
                                  _chain(tg.constant(x + 1)).numpy())
    assert _kernels(traced, x) == []
    assert "no compiler today" in fusion.unavailable_reason("numpy")


def test_a_compiler_that_never_returns_is_stopped(held_compiler, tmp_path, monkeypatch):
    """A background compile that hangs held its process's exit (the exit waits for the
    compiles) for ever; the compiler is stopped after build.COMPILE_TIMEOUT_S and the function
    stays unfused, saying why."""
    import time
    pid = tmp_path / "pid"
    stuck = tmp_path / "stuckcxx"
    stuck.write_text("#!/bin/sh\n"
                     f'case "$*" in *--version*|*-E\\ -P*) exec {shutil.which("g++") or "cc"} '
                     f'"$@";; esac\necho $$ > {pid}\nexec sleep 60\n')
    stuck.chmod(stuck.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(build, "CXX", str(stuck))
    monkeypatch.setattr(build, "COMPILE_TIMEOUT_S", 1)
    monkeypatch.setattr(fusion, "_failed", {})
    traced = tg.function(_chain)
    x = np.linspace(0, 1, 16).astype(np.float32)
    traced(tg.constant(x))
    start = time.monotonic()
    fusion.wait_compiled()
    assert time.monotonic() - start < 30
    with pytest.raises(ProcessLookupError):   # the compiler was killed, not left behind
        os.kill(int(pid.read_text()), 0)
    np.testing.assert_array_equal(traced(tg.constant(x + 1)).numpy(),
                                  _chain(tg.constant(x + 1)).numpy())
    assert _kernels(traced, x) == []
    assert "did not finish compiling" in fusion.unavailable_reason("numpy")


def test_jit_compile_true_and_the_switch_off_compile_in_the_call(held_compiler, monkeypatch):
    held_compiler()
    for fn in (tg.function(_chain, jit_compile=True), None):
        if fn is None:
            monkeypatch.setattr(options, "compile_in_background", False)
            monkeypatch.setattr(fusion, "_compiled", {})
            monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(os.environ["TAPEGPU_EMU_CACHE"]) + "2")
            fn = tg.function(_chain)
        fn(tg.constant(np.ones(4, np.float32)))
        assert len(_kernels(fn, np.ones(4, np.float32))) == 1  # fused at the first replay
