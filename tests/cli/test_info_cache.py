"""`python -m tapegpu info` says where the kernel cache is, what it holds, and the BLAS's
threads."""
import os
import re
import subprocess
import sys

import tapegpu

SINGLE_DEVICE = True  # about the machine, not a device
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tapegpu.__file__)))


def info(env):
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env = {**base, "PYTHONPATH": os.pathsep.join(
        filter(None, [ROOT, os.environ.get("PYTHONPATH")])), **env}
    r = subprocess.run([sys.executable, "-m", "tapegpu", "info", "--no-kernel-checks"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return dict(line.strip().split(": ", 1) for line in r.stdout.splitlines() if ": " in line)


def counts(line, cache):
    """(libraries, MB) from info's "kernel cache" line about `cache`."""
    assert line.startswith(f"{cache}: "), line
    m = re.match(r"(\d+) libraries, ([\d.]+) MB", line[len(f"{cache}: "):])
    return (0, 0.0) if m is None else (int(m.group(1)), float(m.group(2)))


def test_info_shows_the_kernel_cache_place_and_size(tmp_path):
    cache = tmp_path / "emu"
    before = counts(info({"TAPEGPU_EMU_CACHE": str(cache)})["kernel cache"], cache)
    cache.mkdir(exist_ok=True, mode=0o700)
    (cache / "k-0123-4567.so").write_bytes(b"\0" * 1_500_000)
    (cache / "k-0123.json").write_text("{}")
    after = counts(info({"TAPEGPU_EMU_CACHE": str(cache)})["kernel cache"], cache)
    assert after[0] >= before[0] + 1 and after[1] >= before[1] + 1.5, (before, after)


def test_info_shows_the_blas_threads_and_why(tmp_path):
    out = info({"TAPEGPU_EMU_CACHE": str(tmp_path), "OPENBLAS_NUM_THREADS": "1"})
    if out["blas threads"].startswith("no BLAS"):
        return
    assert out["blas threads"] == "1 (as OPENBLAS_NUM_THREADS=1 set)"
