"""The emulator's build cache loads shared libraries, and loading runs their code: it must load
only what tapegpu built, survive damaged files, and fall back to a private directory when the
configured one is unsafe or unusable. Each test has its own cache directory (tmp_path)."""

SINGLE_DEVICE = True  # about the emulator's cache, not a tapegpu device

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import tapegpu
from tapegpu import backends as backend
from tapegpu.backends.emu import RawModule
from tapegpu.backends.emu import build as emu_build

CODE = 'extern "C" __global__ void k(float *y) { y[threadIdx.x] = 2.0f * threadIdx.x; }'
ROOT = str(Path(tapegpu.__file__).resolve().parent.parent)
RUN = (
    "import numpy as np\n"
    "from tapegpu.backends.emu import RawModule\n"
    f"m = RawModule(code={CODE!r})\n"
    "y = np.zeros(4, np.float32); m.get_function('k')(1, 4, (y,))\n"
    "assert (y == 2 * np.arange(4)).all(), y\n"
    "print('ran')\n")
PLANTED = r'''
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(MARKER, "w");
    if (f) { fputs("planted library ran\n", f); fclose(f); }
}
'''
IS_ROOT = os.geteuid() == 0
NOBODY = 65534
# root ignores permission bits; without its capabilities (setpriv) it honours them
NO_CAPS = ["setpriv", "--inh-caps=-all", "--bounding-set=-all"] if IS_ROOT else []


def run_kernel():
    y = np.zeros(4, np.float32)
    RawModule(code=CODE).get_function("k")(1, 4, (y,))
    np.testing.assert_array_equal(y, 2 * np.arange(4))


def run_in_subprocess(cache, prefix=()):
    env = dict(os.environ, TAPEGPU_EMU_CACHE=str(cache),
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    return subprocess.run([*prefix, sys.executable, "-c", RUN], env=env, capture_output=True,
                          text=True, timeout=60)


def private_dir(path):
    path.mkdir()
    path.chmod(0o700)
    return path


@pytest.fixture(scope="module")
def planted_so(tmp_path_factory):
    """(library, marker): a shared library whose constructor writes the marker file."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    d = tmp_path_factory.mktemp("planted")
    marker = d / "marker"
    (d / "planted.c").write_text(PLANTED)
    subprocess.run(["gcc", "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o", str(d / "planted.so"),
                    str(d / "planted.c")], check=True)
    return d / "planted.so", marker


def plant(cache, planted_so, manifest=True):
    """Put the planted library where the cache looks for CODE's library: under the plain
    `<stem>-<key>.so` name and, with `manifest`, under a manifest that describes it exactly."""
    so, marker = planted_so
    if marker.exists():
        marker.unlink()
    key = emu_build.content_hash(CODE)
    data = so.read_bytes()
    shutil.copy(so, cache / f"_code_-{key}.so")
    if manifest:
        sha = hashlib.sha256(data).hexdigest()
        name = f"_code_-{key}-{sha[:16]}.so"
        shutil.copy(so, cache / name)
        (cache / f"_code_-{key}.json").write_text(json.dumps(
            {"format": 1, "key": key, "library": name, "size": len(data), "sha256": sha}))
        for p in (cache / name, cache / f"_code_-{key}.json"):
            p.chmod(0o600)
    return marker


# ------------------------------------------------------------ nothing tapegpu did not build runs


def test_a_world_writable_cache_dir_is_not_used(tmp_path, monkeypatch, planted_so):
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o777)
    marker = plant(cache, planted_so)   # even with a manifest that matches it
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    with pytest.warns(emu_build.EmuCacheWarning, match=r"(?s)shared.*writable by group and "
                                                        r"others \(mode 777\).*chmod"):
        run_kernel()
    assert not marker.exists(), "a library from a world-writable directory was loaded"
    path, _ = emu_build.build_library(CODE, "<code>")
    assert path.parent == Path(emu_build._fallback) != cache


def test_a_group_writable_cache_dir_is_not_used(tmp_path, monkeypatch):
    cache = tmp_path / "group"
    cache.mkdir()
    cache.chmod(0o770)
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    with pytest.warns(emu_build.EmuCacheWarning, match=r"writable by group \(mode 770\)"):
        path, _ = emu_build.build_library(CODE, "k.cu")
    assert path.parent != cache and not list(cache.iterdir())


@pytest.mark.skipif(not IS_ROOT, reason="only root can give a directory to another user")
def test_a_cache_dir_owned_by_another_user_is_not_used(tmp_path, monkeypatch, planted_so):
    cache = private_dir(tmp_path / "theirs")
    marker = plant(cache, planted_so)
    for p in [cache, *cache.iterdir()]:
        os.chown(p, NOBODY, NOBODY)
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    with pytest.warns(emu_build.EmuCacheWarning, match=f"owned by uid {NOBODY}, not by you"):
        run_kernel()
    assert not marker.exists()


def test_a_cache_dir_under_a_world_writable_parent_is_not_used(tmp_path, monkeypatch):
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)   # no sticky bit: anyone could rename our directory and put theirs
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(parent / "cache"))
    with pytest.warns(emu_build.EmuCacheWarning, match=r"its parent .*open is writable by group "
                                                        r"and others"):
        path, _ = emu_build.build_library(CODE, "k.cu")
    assert parent not in path.parents


@pytest.mark.parametrize("how", ["no manifest", "wrong sha256", "manifest writable by others",
                                 "library writable by group", "manifest is a symlink",
                                 "manifest is a fifo"])
def test_a_planted_library_is_not_loaded(tmp_path, monkeypatch, planted_so, how):
    """A library in a private cache directory is loaded only through a manifest that matches
    it, both files owned by the user and writable by no one else; else it is rebuilt."""
    cache = private_dir(tmp_path / "cache")
    marker = plant(cache, planted_so, manifest=how != "no manifest")
    key = emu_build.content_hash(CODE)
    manifest = cache / f"_code_-{key}.json"
    if how == "wrong sha256":
        m = json.loads(manifest.read_text())
        m["sha256"] = "0" * 64
        manifest.write_text(json.dumps(m))
    elif how == "manifest writable by others":
        manifest.chmod(0o606)
    elif how == "library writable by group":
        (cache / json.loads(manifest.read_text())["library"]).chmod(0o620)
    elif how == "manifest is a symlink":
        elsewhere = tmp_path / "elsewhere.json"
        manifest.rename(elsewhere)
        manifest.symlink_to(elsewhere)
    elif how == "manifest is a fifo":   # opening it must not hang
        manifest.unlink()
        os.mkfifo(manifest, 0o600)
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    run_kernel()
    assert not marker.exists(), f"planted library loaded ({how})"
    # what was rebuilt is checked and loaded from now on
    lib = emu_build.verified_library(cache, "_code_", key)
    assert lib is not None and lib.read_bytes() != planted_so[0].read_bytes()


# ------------------------------------------------------------ damaged files are rebuilt


@pytest.mark.parametrize("size", ["truncated", "empty"])
def test_a_damaged_library_is_rebuilt(tmp_path, size):
    """A truncated library used to kill every later process with SIGBUS, an empty one to fail
    forever; a fresh process is used each time so that nothing is already mapped."""
    cache = private_dir(tmp_path / "cache")
    r = run_in_subprocess(cache)
    assert r.returncode == 0, r.stderr
    libs = [p for p in cache.iterdir() if p.suffix == ".so"]
    assert len(libs) == 1
    with open(libs[0], "r+b") as f:   # in place, as a full disk or a killed copy would leave it
        f.truncate(12288 if size == "truncated" else 0)   # 12 KiB: inside the loaded segments
    r = run_in_subprocess(cache)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
    assert r.stdout.strip() == "ran"
    assert [p for p in cache.iterdir() if p.suffix == ".so"] == libs
    assert libs[0].stat().st_size > 1000


def test_a_corrupt_manifest_is_rebuilt(tmp_path, monkeypatch):
    cache = private_dir(tmp_path / "cache")
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    path, key = emu_build.build_library(CODE, "k.cu")
    manifest = emu_build.manifest_path(cache, "k", key)
    manifest.write_text(manifest.read_text()[:20])
    assert emu_build.verified_library(cache, "k", key) is None
    assert emu_build.build_library(CODE, "k.cu") == (path, key)
    assert emu_build.verified_library(cache, "k", key) == path


# ------------------------------------------------------------ files and directories


def test_cache_files_are_private_and_written_atomically(tmp_path, monkeypatch):
    cache = tmp_path / "a" / "b"
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    path, key = emu_build.build_library(CODE, "k.cu")
    for d in (tmp_path / "a", cache):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    manifest = emu_build.manifest_path(cache, "k", key)
    assert sorted(p.name for p in cache.iterdir() if not emu_build.is_shared_part(p)) == \
        sorted([path.name, manifest.name])
    for p in (path, manifest):
        st = p.stat()
        assert st.st_uid == os.geteuid() and not st.st_mode & 0o022, p
    m = json.loads(manifest.read_text())
    assert m["library"] == path.name and m["size"] == path.stat().st_size and m["key"] == key


def test_an_existing_private_cache_dir_is_used_silently(tmp_path, monkeypatch, recwarn):
    cache = tmp_path / "mine"
    cache.mkdir()
    cache.chmod(0o755)   # readable by others is fine: they cannot put anything there
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    path, _ = emu_build.build_library(CODE, "k.cu")
    assert path.parent == cache
    assert not [w for w in recwarn if issubclass(w.category, emu_build.EmuCacheWarning)]


# ------------------------------------------------------------ unusable directories


def test_an_uncreatable_cache_dir_falls_back_with_a_warning(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a directory")
    cache = tmp_path / "file" / "cache"
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    with pytest.warns(emu_build.EmuCacheWarning, match=r"(?s)file/cache: it cannot be created.*"
                                                        r"private temporary directory"):
        run_kernel()
    path, _ = emu_build.build_library(CODE, "k.cu")
    fallback = path.parent
    assert fallback == Path(emu_build._fallback) and stat.S_IMODE(fallback.stat().st_mode) == 0o700


@pytest.mark.skipif(IS_ROOT and shutil.which("setpriv") is None,
                    reason="root writes anywhere; dropping its capabilities needs setpriv")
def test_a_read_only_cache_dir_falls_back_with_a_warning(tmp_path):
    cache = tmp_path / "ro"
    cache.mkdir()
    cache.chmod(0o500)
    try:
        r = run_in_subprocess(cache, NO_CAPS)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "ran"
        assert "EmuCacheWarning" in r.stderr and f"{cache}: it is not writable" in r.stderr, r.stderr
        assert not list(cache.iterdir())
    finally:
        cache.chmod(0o700)


# ------------------------------------------------------------ backend.available() is honest


@pytest.mark.parametrize("compiler", ["missing", "broken"])
def test_the_emulator_backend_is_unavailable_without_a_working_compiler(tmp_path, monkeypatch,
                                                                        compiler):
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(tmp_path / "cache"))
    if compiler == "missing":
        cxx = str(tmp_path / "no-such-g++")
    else:   # found on PATH, answers --version, compiles nothing
        cxx = str(tmp_path / "g++")
        Path(cxx).write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'g++ 0' && exit 0\nexit 1\n")
        os.chmod(cxx, 0o755)
    monkeypatch.setenv("CXX", cxx)
    monkeypatch.setattr(emu_build, "CXX", cxx)
    assert not backend.CudaEmuBackend.available()
    assert cxx in backend.CudaEmuBackend.unavailable_reason()
    assert backend.CUDA_EMU not in backend.available()
    monkeypatch.undo()
    assert backend.CudaEmuBackend.available()


@pytest.mark.skipif(not emu_build._has_gold() or shutil.which("g++") is None,
                    reason="needs binutils' ld.gold and g++")
def test_a_link_gold_cannot_make_is_made_by_the_default_linker(tmp_path, monkeypatch):
    """A compiler installed beside a dangling libstdc++.so link (as in a CUDA image's /opt/gcc):
    gold stops at the link it cannot open, ld.bfd searches on; every kernel failed to build."""
    libs = tmp_path / "gcc-lib"
    libs.mkdir()
    (libs / "libstdc++.so").symlink_to(tmp_path / "missing" / "libstdc++.so.6")
    cxx = tmp_path / "g++"
    cxx.write_text(f'#!/bin/sh\nexec {shutil.which("g++")} "$@" -L{libs}\n')
    cxx.chmod(0o755)
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(private_dir(tmp_path / "cache")))
    monkeypatch.setattr(emu_build, "CXX", str(cxx))
    monkeypatch.setattr(emu_build, "_shared", {})
    monkeypatch.setattr(emu_build, "_gold_refused", set())
    assert emu_build.link_flags() == ["-fuse-ld=gold"]
    seen = _commands(monkeypatch)
    y = np.zeros(4, np.float32)
    RawModule(code=CODE).get_function("k")(1, 4, (y,))
    np.testing.assert_array_equal(y, 2 * np.arange(4))
    links = [c for c in seen if "-shared" in c]
    assert [("-fuse-ld=gold" in c) for c in links] == [True, False]
    assert emu_build.link_flags() == []   # this compiler's later links skip gold
    RawModule(code=CODE.replace("2.0f", "3.0f")).get_function("k")(1, 4, (y,))
    assert [("-fuse-ld=gold" in c) for c in seen if "-shared" in c] == [True, False, False]


# ------------------------------------------------------------ shared parts (runtime, header)


def _commands(monkeypatch):
    """Records the compiler commands the build runs."""
    seen, real = [], subprocess.run

    def spy(cmd, *a, **k):
        seen.append([str(c) for c in cmd])
        return real(cmd, *a, **k)
    monkeypatch.setattr(emu_build.subprocess, "run", spy)
    return seen


def test_the_runtime_and_header_are_compiled_once_per_cache(tmp_path, monkeypatch):
    """Every library used to compile runtime.cpp and cuda_emu.h again (1.9 s of CPU of its
    2.3); they are built once into the cache and each library links the runtime's object."""
    cache = private_dir(tmp_path / "cache")
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    monkeypatch.setattr(emu_build, "_shared", {})
    run_kernel()
    parts = sorted(p.name for p in cache.iterdir() if emu_build.is_shared_part(p)
                   and p.name.startswith("emu_") and p.suffix != ".json")
    assert [p.split("-")[0] for p in parts] == ["emu_pch", "emu_runtime"]
    monkeypatch.setattr(emu_build, "_shared", {})   # as a new process: found in the cache
    monkeypatch.setattr(emu_build, "_build_shared", lambda *a: pytest.fail("built again"))
    seen = _commands(monkeypatch)
    other = CODE.replace("2.0f", "3.0f")
    y = np.zeros(4, np.float32)
    RawModule(code=other).get_function("k")(1, 4, (y,))
    np.testing.assert_array_equal(y, 3 * np.arange(4))
    link = [c for c in seen if "-shared" in c]
    assert len(link) == 1 and str(emu_build.RUNTIME) not in link[0]
    assert any(a.endswith(".o") and "emu_runtime-" in a for a in link[0])
    pch = link[0][link[0].index("-I") + 1]
    assert (Path(pch) / "cuda_emu.h.gch").is_file()


HOST = "#include <math.h>\nextern \"C\" __attribute__((visibility(\"default\"))) " \
       "float f(float x) { return tanhf(x); }\n"


def test_cpu_libraries_read_math_h_precompiled(tmp_path, monkeypatch):
    """A fused CPU kernel's `#include <math.h>` was parsed anew for every library (about half of
    its compile); it is precompiled once per cache directory and flags, and a library built
    with it computes what one built from the header does."""
    import ctypes
    cache = private_dir(tmp_path / "cache")
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    monkeypatch.setattr(emu_build, "_shared", {})
    seen = _commands(monkeypatch)
    path, _ = emu_build.build_host_library(HOST, "f.cpp", ("-O1",))
    link = [c for c in seen if "-shared" in c]
    assert len(link) == 1
    pch = Path(link[0][link[0].index("-I") + 1])
    assert (pch / "host_math.h.gch").is_file() and pch.parent == cache
    built = [c for c in seen if "c++-header" in c]
    assert len(built) == 1 and built[0][-3].endswith("host_math.h")
    seen.clear()
    monkeypatch.setattr(emu_build, "_shared", {})   # as a new process: found in the cache
    emu_build.build_host_library(HOST.replace("tanhf", "expf"), "g.cpp", ("-O1",))
    assert not [c for c in seen if "c++-header" in c] and len(seen) == 1
    monkeypatch.setattr(emu_build, "host_pch", lambda *a: None)   # the header itself
    plain, _ = emu_build.build_host_library(HOST + "\n", "f.cpp", ("-O1",))
    xs = np.linspace(-3, 3, 101, dtype=np.float32)
    f1, f2 = (getattr(ctypes.CDLL(str(p)), "f") for p in (path, plain))
    for f in (f1, f2):
        f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
    assert [f1(float(x)) for x in xs] == [f2(float(x)) for x in xs]


OVERLOADS = """#include <math.h>
extern "C" __attribute__((visibility("default"))) void f(const float *x, float *y, double *z) {
  float a = x[0], b = x[1];
  const float r[] = {sin(a), cos(a), tanh(a), exp(a), log(b), sqrt(b), pow(a, b), pow(a, 3),
                     abs(a), fabs(a), fmod(a, b), atan2(a, b), erf(a), lgamma(b), cbrt(a),
                     hypot(a, b), expm1(a), log1p(b), floor(a), round(a), copysign(b, a)};
  for (int i = 0; i < 21; ++i) y[i] = r[i];
  z[0] = sizeof(sin(a)) + 10 * sizeof(pow(a, 3)) + 100 * sizeof(abs(a)) + 1000 * sizeof(sqrt(2));
}
"""


def test_the_lighter_math_header_keeps_every_overload(tmp_path, monkeypatch):
    """Generated kernels read emu_math.h, C++'s <math.h> without the C++17 special functions
    (two thirds of what g++ read per library): a float argument still picks the float function
    (sin(float) is sinf, pow(float, int) is double's), bit for bit as <math.h> itself."""
    import ctypes
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(private_dir(tmp_path / "cache")))
    monkeypatch.setattr(emu_build, "_shared", {})
    light, _ = emu_build.build_host_library(OVERLOADS, "light.cpp", ("-O1",))
    monkeypatch.setattr(emu_build, "host_pch", lambda *a: None)   # <math.h> itself
    plain, _ = emu_build.build_host_library(OVERLOADS + "\n", "plain.cpp", ("-O1",))
    results = []
    for path in (light, plain):
        x, y, z = np.array([0.7, 2.3], np.float32), np.zeros(21, np.float32), np.zeros(1)
        getattr(ctypes.CDLL(str(path)), "f")(*(a.ctypes.data_as(ctypes.c_void_p)
                                                for a in (x, y, z)))
        results.append((y.tobytes(), z[0]))
    assert results[0] == results[1] and results[0][1] == 4 + 80 + 400 + 8000
    bad = OVERLOADS.replace("z[0] =", "z[0] = std::riemann_zeta(2.0) +")  # what it leaves out
    with pytest.raises(emu_build.EmuCompileError, match="riemann_zeta"):
        emu_build.build_host_library(bad.replace(
            "#include <math.h>", '#include "%s"' % emu_build.MATH_HEADER), "bad.cpp", ("-O1",))


def test_a_damaged_runtime_object_is_rebuilt_not_linked(tmp_path, monkeypatch):
    cache = private_dir(tmp_path / "cache")
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    monkeypatch.setattr(emu_build, "_shared", {})
    run_kernel()
    obj = next(p for p in cache.iterdir() if p.name.startswith("emu_runtime-")
               and p.suffix == ".o")
    good = obj.read_bytes()
    obj.write_bytes(b"\0" * len(good))   # same size, other bytes
    monkeypatch.setattr(emu_build, "_shared", {})
    y = np.zeros(4, np.float32)
    RawModule(code=CODE.replace("2.0f", "5.0f")).get_function("k")(1, 4, (y,))
    np.testing.assert_array_equal(y, 5 * np.arange(4))
    assert obj.read_bytes() == good      # rebuilt (the build is reproducible)


# ------------------------------------------------------------ sources built together
MEMBER = '''typedef {t} T;
__constant__ T scale{j}[1];
static __device__ T times(T v) {{ return v * {j}; }}
extern "C" __global__ void k{j}(const T *__restrict__ x, T *__restrict__ y, long long n) {{
  for (long long i = threadIdx.x; i < n; i += blockDim.x) y[i] = times(tanh(x[i])) + scale{j}[0];
}}'''


def _members(n=3):
    """Generated-looking sources whose file-scope names clash (T, times): one library keeps
    them apart."""
    return [MEMBER.format(t=("float", "double")[j % 2], j=j + 1) for j in range(n)]


def test_sources_built_together_make_one_library_each_source_finds(tmp_path, monkeypatch):
    cache = private_dir(tmp_path / "cache")
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    sources = _members()
    seen = _commands(monkeypatch)
    emu_build.build_libraries([(s, "<code>") for s in sources])
    assert len([c for c in seen if "-shared" in c]) == 1   # one library for the three
    monkeypatch.setattr(emu_build, "_compile", lambda *a: pytest.fail("built one alone"))
    for j, source in enumerate(sources):
        module = RawModule(code=source)
        dtype = (np.float32, np.float64)[j % 2]
        module.get_global(f"scale{j + 1}").view(dtype)[:] = 0.5
        x = np.linspace(-2, 2, 7).astype(dtype)
        y = np.zeros_like(x)
        module.get_function(f"k{j + 1}")(1, 4, (x, y, np.int64(7)))
        np.testing.assert_allclose(y, np.tanh(x) * (j + 1) + 0.5, rtol=1e-6)
        assert module.get_function(f"k{j + 1}").param_types[0] == ("cf4*", "cf8*")[j % 2]
    libraries = {p.name for p in cache.iterdir() if p.suffix == ".so"}
    assert len(libraries) == 1 and libraries.pop().startswith(emu_build.BATCH_STEM + "-")
    # another process (no library loaded, nothing in memory) finds them too, without building
    r = run_in_subprocess(cache)   # CODE is not a member: it is built alone, as before
    assert r.returncode == 0 and "ran" in r.stdout, r.stderr
    env = dict(os.environ, TAPEGPU_EMU_CACHE=str(cache),
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    probe = ("from tapegpu.backends.emu import RawModule, build\n"
             "build._compile = None\n"   # any build would fail
             f"for s in {sources!r}: RawModule(code=s)\n"
             "print('found')\n")
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "found" in r.stdout, r.stderr


def test_sources_whose_entry_points_clash_are_built_alone(tmp_path, monkeypatch):
    cache = private_dir(tmp_path / "cache")
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    a, b, c = _members(3)
    same = b.replace("k2", "k1").replace("* 2", "* 5")   # exports k1 and scale2 as a, b do
    emu_build.build_libraries([(s, "<code>") for s in (a, same, c)])
    batched = {p for p in cache.glob("_code_-*.json") if "batch" in json.loads(p.read_text())}
    assert len(batched) == 2   # a and c
    x, y = np.ones(3), np.zeros(3)   # b's T is double
    RawModule(code=same).get_function("k1")(1, 4, (x, y, np.int64(3)))
    np.testing.assert_allclose(y, np.tanh(1.0) * 5, rtol=1e-12)


def test_a_source_that_fails_is_reported_alone(tmp_path, monkeypatch):
    """One bad source fails the library of several: each is then built alone, the good ones
    run and the bad one's error names its own line."""
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(private_dir(tmp_path / "cache")))
    good = _members(2)
    bad = 'extern "C" __global__ void broken(float *y) {\n  y[0] = undeclared;\n}'
    emu_build.build_libraries([(good[0], "<code>"), (bad, "<code>"), (good[1], "<code>")])
    for s in good:
        RawModule(code=s)
    with pytest.raises(emu_build.EmuCompileError, match=r"<code>:2:.*undeclared"):
        RawModule(code=bad)


def test_a_member_manifest_cannot_point_outside_the_cache(tmp_path, monkeypatch):
    cache = private_dir(tmp_path / "cache")
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(cache))
    sources = _members(2)
    emu_build.build_libraries([(s, "<code>") for s in sources])
    key = emu_build.content_hash(sources[0])
    manifest = emu_build.manifest_path(cache, "_code_", key)
    m = json.loads(manifest.read_text())
    assert emu_build.verified_library(cache, "_code_", key) == cache / m["library"]
    for batch in ("../" + m["batch"], m["batch"][:-1] + "/", 7, None):
        bad = dict(m, batch=batch, library=f"{emu_build.BATCH_STEM}-{batch}-{m['sha256'][:16]}.so")
        manifest.write_text(json.dumps(bad))
        assert emu_build.verified_library(cache, "_code_", key) is None


def test_cpu_sources_built_together(tmp_path, monkeypatch):
    import ctypes
    monkeypatch.setenv("TAPEGPU_EMU_CACHE", str(private_dir(tmp_path / "cache")))
    body = ("#include <math.h>\ntypedef {t} T;\nextern \"C\" __attribute__((visibility("
            "\"default\"))) T f{j}(T x) {{ return tanh(x) * {j}; }}\n")
    sources = [body.format(t=("float", "double")[j % 2], j=j) for j in range(3)]
    seen = _commands(monkeypatch)
    emu_build.build_host_libraries([(s, f"f{j}") for j, s in enumerate(sources)], ("-O1",))
    assert len([c for c in seen if "-shared" in c]) == 1
    monkeypatch.setattr(emu_build, "_compile", lambda *a: pytest.fail("built one alone"))
    paths = {emu_build.build_host_library(s, f"f{j}", ("-O1",))[0]
             for j, s in enumerate(sources)}
    assert len(paths) == 1
    lib = ctypes.CDLL(str(paths.pop()))
    for j in range(3):
        f = getattr(lib, f"f{j}")
        f.restype = (ctypes.c_float, ctypes.c_double)[j % 2]
        f.argtypes = [f.restype]
        assert f(0.5) == pytest.approx(np.tanh(0.5) * j, rel=1e-6)
