"""Turn a CUDA C source into a shared library the emulator can load.

The source is rewritten as little as possible (only ``extern __shared__``
declarations, on their own lines, so compiler messages keep the original line
numbers), a launcher is appended that exports, for every
``extern "C" __global__`` kernel ``K``:

* ``emu_launch_K(config, args)``: run ``K`` on the fiber scheduler, with
  ``args`` an array of pointers to the argument values (as ``cuLaunchKernel``);
* ``emu_signature_K()``: the parameter types as the compiler sees them, for the
  argument checks in Python;

and, for every ``__constant__`` variable ``C``, ``emu_global_C(&size)``.

Libraries are cached by a content hash of everything that goes into them:
generated source, shim header, runtime, flags and compiler version. Loading a
library runs its code (constructors run inside dlopen), so the cache trusts
nothing it did not write itself:

* the cache directory must belong to the current user and not be writable by
  group or others (nor may its parents be, unless sticky); directories are
  created with mode 0700. A directory that fails these checks, or cannot be
  created or written, is not used: the build goes to a private temporary
  directory instead, with an ``EmuCacheWarning`` saying why;
* every file is written under a temporary name in the same directory, fsynced
  and renamed into place (``os.replace``), so a reader sees a complete file or
  none, and a file another process has mapped is never changed in place;
* after a successful build a manifest ``<stem>-<key>.json`` records the content
  hash, the library's name, size and sha256. The library
  (``<stem>-<key>-<sha256 prefix>.so``) is loaded only if the manifest and the
  library are regular files owned by the user, not writable by group or others,
  and the library's size and sha256 match the manifest; this is checked
  before dlopen. Anything else (no manifest, a truncated or empty library, a
  planted one) is rebuilt.

What every emulated library shares is built once per cache directory and flags, not once per
library: the runtime (``runtime.cpp``) as an object file that each library links, and the
shim header (``cuda_emu.h``) precompiled (g++'s ``.gch``, found before the header on the
include path; g++ falls back to the header where the precompiled one does not apply). Both are
cached and checked as libraries are (manifest, owner, permissions, size, sha256), built under a
lock so that parallel processes build them once. A kernel's library then costs the compile of
its own source and a link: about 0.1 s of CPU instead of 1.9 s. The header keeps that small:
no <string>, <type_traits> or <utility> (the launcher's helpers are written without them), and
<math.h> without C++17's special functions (``emu_math.h``); each took longer to read and
instantiate than a fused kernel takes to compile. A generated source without preprocessor
directives is parsed as it is (no `g++ -E` process).
"""

import atexit
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

from ...core import files

HERE = Path(__file__).resolve().parent
HEADER = HERE / "cuda_emu.h"
RUNTIME = HERE / "runtime.cpp"
HOST_HEADER = HERE / "host_math.h"   # a CPU library's `#include <math.h>`, precompiled
MATH_HEADER = HERE / "emu_math.h"    # <math.h> as both headers read it

CXX = os.environ.get("CXX", "g++")
# A compiler that has not finished a library in this time is stopped and the build fails (a
# background compile would otherwise hold up its process's exit for ever); a large generated
# kernel takes a few seconds.
COMPILE_TIMEOUT_S = 600
BASE_FLAGS = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-fno-gnu-unique",
              "-fno-strict-aliasing", "-fstack-clash-protection", "-g1"]


class EmuCompileError(RuntimeError):
    """g++ rejected a kernel source (the message carries the compiler output)."""


class EmuCacheWarning(UserWarning):
    """The build cache directory is unsafe or unusable; a private temporary one is used."""


_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?'
                     r'void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)', re.S)
_EXTERN_SHARED = re.compile(r'extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?'
                            r'([\w\s\*]+?)\s*(?:__align__\s*\(\s*\d+\s*\)\s*)?(\w+)\s*\[\s*\]\s*;')
_CONSTANT = re.compile(r'__constant__\s+[^;=]*?(\w+)\s*(?:\[[^\]]*\]\s*)*(?:=|;)')
_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/', re.S)


def _blank_comments(source):
    """Replace comments by spaces (newlines kept), so the regexes see only code."""
    return _COMMENT.sub(lambda m: re.sub(r'[^\n]', ' ', m.group()), source)


def parse(source):
    """Return (kernels, constants): kernel names with parameter names, constant names."""
    code = _blank_comments(source)
    kernels = {}
    for m in _KERNEL.finditer(code):
        params = [p.strip() for p in m.group(2).split(",") if p.strip() not in ("", "void")]
        kernels[m.group(1)] = [re.findall(r'\w+', p)[-1] for p in params]
    return kernels, [m.group(1) for m in _CONSTANT.finditer(code)]


def rewrite(source, filename):
    """`extern __shared__ T a[];` -> `T *a = (T *)emu_dynamic_shared;` (same line)."""
    code = _blank_comments(source)
    out, last = [], 0
    for m in _EXTERN_SHARED.finditer(code):
        depth = code.count("{", 0, m.start()) - code.count("}", 0, m.start())
        if depth <= 0:
            line = code.count("\n", 0, m.start()) + 1
            raise EmuCompileError(f"{filename}:{line}: extern __shared__ at file scope is not "
                                  "supported by the emulator; declare it inside the kernel")
        ctype, name = " ".join(m.group(1).split()), m.group(2)
        out += [source[last:m.start()], f"{ctype} *{name} = ({ctype} *)emu_dynamic_shared;"]
        last = m.end()
    out.append(source[last:])
    return "".join(out)


def preprocess(source, defines=()):
    """The source after the C preprocessor (no header): kernels stamped out by
    macros become visible to `parse`."""
    r = subprocess.run([CXX, "-E", "-P", "-x", "c++", "-std=c++17", *defines, "-"], input=source,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise EmuCompileError(f"preprocessing failed:\n{r.stderr}")
    return r.stdout


def generate(source, filename, kernels, constants, key):
    """The translation unit g++ compiles: header, rewritten source, launcher, manifest."""
    parts = ['#include "cuda_emu.h"', *_member(source, filename, kernels, constants)]
    manifest = json.dumps({"hash": key, "kernels": kernels, "constants": constants})
    parts.append(f"EMU_EXPORT const char *emu_manifest(void) {{ return {json.dumps(manifest)}; }}")
    return "\n".join(parts) + "\n"


def _member(source, filename, kernels, constants, namespace=None):
    """A source's part of a translation unit: the rewritten source (in `namespace` when
    given: the sources of one library keep their file-scope names apart), then its launcher."""
    name = filename.replace("\\", "/").replace('"', "")
    body = [f'#line 1 "{name}"', rewrite(source, filename)]
    if namespace is not None:
        body = [f"namespace {namespace} {{", *body, "}"]
    parts = [*body, "#line 1 \"<emulator launcher>\""]
    q = f"{namespace}::" if namespace is not None else ""
    for k in kernels:
        parts.append(
            f"EMU_EXPORT int emu_launch_{k}(const long long *config, void **args) {{\n"
            f"  return emu_run(config, args, [](void **emu_args) {{ emu_invoke({q}{k}, emu_args); }});\n}}\n"
            f"EMU_EXPORT const char *emu_signature_{k}(void) {{ return emu_signature({q}{k}); }}")
    for c in constants:
        parts.append(f"EMU_EXPORT void *emu_global_{c}(size_t *size) "
                     f"{{ *size = sizeof({q}{c}); return (void *)&{q}{c}; }}")
    return parts


def compiler_version():
    return _compiler_version(CXX)


@functools.lru_cache(maxsize=None)
def _compiler_version(cxx):
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise EmuCompileError(f"the emulator needs a C++ compiler ({cxx!r}): {e}") from e
    lines = out.stdout.splitlines()
    return lines[0] if lines else ""


# ------------------------------------------------------------------ cache directory

MANIFEST_FORMAT = 1
_fallback = None       # the private temporary directory of this process, once needed
_warned = set()
_fallback_lock = threading.Lock()


def configured_cache_dir():
    """$TAPEGPU_EMU_CACHE, or ~/.cache/tapegpu/emu."""
    return os.environ.get("TAPEGPU_EMU_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "tapegpu", "emu")


def cache_summary():
    """Where the kernel cache is and what it holds: "<dir>: N libraries, X MB", read without
    creating the directory (`python -m tapegpu info`)."""
    d = configured_cache_dir()
    if not os.path.isdir(d):
        return f"{d}: empty (each kernel is compiled at its first use, then kept here)"
    libraries, size = 0, 0
    for root, _dirs, names in os.walk(d):
        for name in names:
            try:
                size += os.lstat(os.path.join(root, name)).st_size
            except OSError:   # removed meanwhile
                continue
            libraries += name.endswith(".so")
    return f"{d}: {libraries} libraries, {size / 1e6:.1f} MB (TAPEGPU_EMU_CACHE sets the place)"


def cache_dir():
    """The directory to build into: the configured one if it is safe and usable,
    else (with an EmuCacheWarning) a private temporary directory of this process."""
    d = configured_cache_dir()
    try:
        real, problem = _check_cache_dir(d)
    except OSError as e:
        problem = f"it cannot be used ({e.strerror or e}); set TAPEGPU_EMU_CACHE to a directory of yours"
    if problem:
        return _fall_back(d, problem)
    return Path(real)


def _makedirs_private(d):
    """Create `d` and its missing parents with mode 0700."""
    missing = []
    p = os.path.abspath(d)
    while not os.path.lexists(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass


def _check_cache_dir(d):
    """(resolved path, None) if `d` is safe to load libraries from, else (None, what is
    wrong and how to fix it)."""
    try:
        _makedirs_private(d)
    except OSError as e:
        return None, (f"it cannot be created ({e.strerror or e}); set TAPEGPU_EMU_CACHE to a "
                      "directory you can write")
    real = os.path.realpath(d)
    st = os.stat(real)
    uid = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        return None, "it is not a directory; set TAPEGPU_EMU_CACHE to a directory of yours"
    if st.st_uid != uid:
        return None, (f"it is owned by uid {st.st_uid}, not by you (uid {uid}), who could put a "
                      "library there that would run as you; set TAPEGPU_EMU_CACHE to a directory "
                      "of your own")
    if st.st_mode & 0o022:
        return None, (f"it is writable by {_who(st.st_mode)} (mode {stat.S_IMODE(st.st_mode):o}), "
                      f"who could put a library there that would run as you; fix with "
                      f"`chmod go-w {real}` (or chmod 700)")
    effective = os.access in os.supports_effective_ids
    if not os.access(real, os.W_OK | os.X_OK, effective_ids=effective):
        return None, ("it is not writable (read-only); make it writable or set TAPEGPU_EMU_CACHE "
                      "to a directory you can write")
    parent = os.path.dirname(real)
    while True:
        pst = os.stat(parent)
        sticky = pst.st_mode & stat.S_ISVTX
        if pst.st_uid not in (0, uid) or (pst.st_mode & 0o022 and not sticky):
            owner = f"owned by uid {pst.st_uid}" if pst.st_uid not in (0, uid) else \
                f"writable by {_who(pst.st_mode)} (mode {stat.S_IMODE(pst.st_mode):o})"
            return None, (f"its parent {parent} is {owner}, so someone else could replace it; "
                          "set TAPEGPU_EMU_CACHE to a directory whose parents only you (or root) "
                          "can write")
        if os.path.dirname(parent) == parent:
            break
        parent = os.path.dirname(parent)
    return real, None


def _who(mode):
    return " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if mode & bit)


def _fall_back(d, problem):
    global _fallback
    with _fallback_lock:
        if _fallback is None:
            _fallback = tempfile.mkdtemp(prefix="tapegpu-emu-")   # mode 0700, owned by us
            atexit.register(shutil.rmtree, _fallback, True)
        first = (d, problem) not in _warned
        _warned.add((d, problem))
    if first:
        warnings.warn(f"tapegpu emulator: not using the kernel cache directory {d}: {problem}. "
                      f"Building into the private temporary directory {_fallback} instead "
                      "(deleted at exit, so kernels are rebuilt in every process).",
                      EmuCacheWarning, stacklevel=4)
    return Path(_fallback)


def flags():
    """Compile flags; TAPEGPU_EMU_ASAN=1 adds AddressSanitizer, TAPEGPU_EMU_UCONTEXT=1
    selects the portable (slower) context switch. The linker is not among them (link_flags)."""
    f = list(BASE_FLAGS)
    if os.environ.get("TAPEGPU_EMU_ASAN") == "1":
        f += ["-fsanitize=address", "-fno-omit-frame-pointer"]
    if os.environ.get("TAPEGPU_EMU_UCONTEXT") == "1":
        f += ["-DEMU_UCONTEXT=1"]
    return f


@functools.lru_cache(maxsize=None)
def _has_gold():
    return shutil.which("ld.gold") is not None


_gold_refused = set()   # the compilers whose links gold failed and the default linker made


def link_flags():
    """Libraries link with gold where binutils has it (a kernel's link: 40 ms instead of 85-110
    with ld.bfd), unless gold failed a link of this compiler that the default linker made: gold
    stops at a library it finds but cannot open (a compiler installed beside a dangling
    libstdc++.so link) where ld.bfd searches on. The linker makes no difference to a library's
    code, so it is not part of the cache's keys."""
    return ["-fuse-ld=gold"] if _has_gold() and CXX not in _gold_refused else []


def _link(cmd, what):
    """Run the link `cmd` (the linker's flags last); a link gold fails is tried again with the
    default linker, and where that one links, this process's later links of the compiler use
    it too."""
    gold = link_flags()
    r = _run_compiler(cmd + gold, what)
    if r.returncode != 0 and gold and "ld returned" in r.stderr:
        again = _run_compiler(cmd, what)
        if again.returncode == 0:
            _gold_refused.add(cmd[0])
        r = again
    return r


def content_hash(source, extra_flags=()):
    h = hashlib.sha256()
    for part in (source, HEADER.read_text(), MATH_HEADER.read_text(), RUNTIME.read_text(),
                 Path(__file__).read_text(),
                 " ".join(flags() + list(extra_flags)), compiler_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def build_library(source, filename, extra_flags=()):
    """Compile (or find in the cache) the library for `source`.

    Returns (library path, content hash); the library has been verified against
    its manifest and may be loaded. Its `emu_manifest()` lists its kernels (with
    parameter names) and constants as JSON."""
    key = content_hash(source, extra_flags)

    def text():
        kernels, constants = parse(source if _plain(source, extra_flags)
                                   else preprocess(source, extra_flags))
        return generate(source, filename, kernels, constants, key)
    return _cached(text, filename, key, extra_flags, emulated=True), key


def _plain(source, extra_flags):
    """Whether `source` is what the preprocessor would give `parse`: no directives, no line
    splices, no defines (a compiler process less per generated kernel)."""
    return "#" not in source and "\\\n" not in source and not extra_flags


def build_host_library(source, filename, extra_flags=()):
    """Compile (or find in the cache) a plain C++ library for the CPU: `source` as it is,
    without the emulator's header and runtime, with the same cache rules and checks as
    `build_library`. Returns (library path, content hash)."""
    extra_flags, key = _host_key(source, extra_flags)
    return _cached(lambda: source, filename, key, extra_flags, emulated=False), key


def _host_key(source, extra_flags):
    extra_flags = ("-ffp-contract=off", *extra_flags)  # no fused multiply-add: numpy's rounding
    return extra_flags, content_hash(source, ("host",) + extra_flags)


def cached_host_library(source, filename, extra_flags=()):
    """The verified library `build_host_library` would return, if it is in the cache; else
    None (nothing is compiled)."""
    _, key = _host_key(source, extra_flags)
    return verified_library(cache_dir(), _stem(filename), key)


# -------------------------------------------------------------- sources built together
# A library's fixed cost (the compiler's processes, the header, the link: about 70 ms) is most
# of a generated kernel's build; a kernel more in the same library costs about 6 ms. So the
# kernels a traced function needs at once are built as one library: each source keeps its own
# manifest (its key, as `build_library` computes it), which names the shared library, so a
# later lookup of any of them, in any process, finds it. Only generated sources take part
# (no directives, no defines: `_plain`); a library that fails to build is left to the single
# builds, which then report the failing source's own error.
BATCH_STEM = "batch"


def build_libraries(sources, extra_flags=()):
    """Build the emulated libraries of `sources` ((source, filename) pairs) not yet in the
    cache as one library, when there are at least two; `build_library` then finds each."""
    todo = {}
    for source, filename in sources:
        if _plain(source, extra_flags):
            todo.setdefault(content_hash(source, extra_flags), (source, filename))
    d = cache_dir()
    todo = {key: sf for key, sf in todo.items() if verified_library(d, _stem(sf[1]), key) is None}
    if len(todo) < 2:
        return
    parts, members, exported = ['#include "cuda_emu.h"'], {}, set()
    for j, (key, (source, filename)) in enumerate(sorted(todo.items())):
        kernels, constants = parse(source)
        names = set(kernels) | {"global " + c for c in constants}
        if names & exported:   # the library's entry points would clash: built alone
            continue
        exported |= names
        parts += _member(source, filename, kernels, constants, f"emu_member_{j}")
        members[key] = {"kernels": kernels, "constants": constants}
    todo = {key: todo[key] for key in members}
    if len(todo) < 2:
        return
    bkey = _batch_key(todo, extra_flags)
    manifest = json.dumps({"hash": bkey, "members": members})
    parts.append(f"EMU_EXPORT const char *emu_manifest(void) {{ return {json.dumps(manifest)}; }}")
    _build_batch("\n".join(parts) + "\n", d, bkey, todo, extra_flags, emulated=True)


def build_host_libraries(sources, extra_flags=()):
    """`build_libraries` for CPU libraries (`build_host_library`'s sources): those that begin
    with `#include <math.h>` and have no other directive are built as one library."""
    flags_, todo = None, {}
    for source, filename in sources:
        if source.startswith(_MATH) and _plain(source[len(_MATH):], ()):
            flags_, key = _host_key(source, extra_flags)
            todo.setdefault(key, (source, filename))
    d = cache_dir()
    todo = {key: sf for key, sf in todo.items() if verified_library(d, _stem(sf[1]), key) is None}
    if len(todo) < 2:
        return
    parts = [_MATH.rstrip("\n")]
    for j, (key, (source, _)) in enumerate(sorted(todo.items())):
        parts += [f"namespace host_member_{j} {{", source[len(_MATH):], "}"]
    _build_batch("\n".join(parts) + "\n", d, _batch_key(todo, flags_), todo, flags_,
                 emulated=False)


def _batch_key(todo, extra_flags):
    return content_hash("\n".join(sorted(todo)), (BATCH_STEM, *extra_flags))


def _build_batch(text, d, bkey, todo, extra_flags, emulated):
    try:
        target = verified_library(d, BATCH_STEM, bkey) or \
            _compile(text, d, BATCH_STEM, bkey, extra_flags, emulated)
    except (EmuCompileError, OSError):
        return
    data = target.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    for key, (_, filename) in todo.items():   # each source's manifest names the library
        manifest = {"format": MANIFEST_FORMAT, "key": key, "library": target.name,
                    "size": len(data), "sha256": sha, "batch": bkey}
        raw = (json.dumps(manifest) + "\n").encode()
        files.atomic_write(manifest_path(d, _stem(filename), key), lambda f: f.write(raw),
                           0o600)


def _stem(filename):
    return re.sub(r'\W', '_', Path(filename).stem)[:40]


def _cached(text, filename, key, extra_flags, emulated):
    """The verified cached library for `key`, built from `text()` when there is none."""
    stem = _stem(filename)
    d = cache_dir()
    target = verified_library(d, stem, key)
    if target is None:
        source = text()
        try:
            target = _compile(source, d, stem, key, extra_flags, emulated)
        except OSError as e:
            if str(d) == _fallback:
                raise
            d = _fall_back(configured_cache_dir(), f"writing to it failed ({e})")
            target = verified_library(d, stem, key) or \
                _compile(source, d, stem, key, extra_flags, emulated)
    return target


def manifest_path(d, stem, key):
    return Path(d) / f"{stem}-{key}.json"


# ------------------------------------------------------------------ shared parts

_shared = {}   # (directory, what, key) -> verified path, or None where the part is not used


def _shared_key(what, extra_flags):
    h = hashlib.sha256()
    for part in (what, HEADER.read_text(), MATH_HEADER.read_text(), RUNTIME.read_text(),
                 HOST_HEADER.read_text(),
                 Path(__file__).read_text(), " ".join(flags() + list(extra_flags)),
                 compiler_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def shared_parts(d, extra_flags=()):
    """(runtime object, directory holding the precompiled cuda_emu.h or None) for libraries
    built into `d` with these flags: from the cache, else built once, under a lock (parallel
    test workers wait for the first instead of building the same parts)."""
    obj, pch = (_shared_part(Path(d), what, extra_flags) for what in ("emu_runtime", "emu_pch"))
    return obj, (pch.parent if pch is not None else None)


def host_pch(d, extra_flags):
    """The directory holding host_math.h precompiled for a CPU library built into `d` with
    these flags, or None (g++ then reads the header)."""
    pch = _shared_part(Path(d), "host_pch", extra_flags)
    return pch.parent if pch is not None else None


def _shared_part(d, what, extra_flags):
    key = _shared_key(what, extra_flags)
    if (str(d), what, key) not in _shared:
        found = verified_library(d, what, key, _SUFFIX[what])
        if found is None:
            with open(d / ".emu-shared.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                found = verified_library(d, what, key, _SUFFIX[what]) or \
                    _build_shared(what, d, key, extra_flags)
        _shared[str(d), what, key] = found
    return _shared[str(d), what, key]


_SUFFIX = {"emu_runtime": ".o", "emu_pch": "/cuda_emu.h.gch", "host_pch": "/host_math.h.gch"}


def is_shared_part(path):
    """True for the files `shared_parts` keeps in a cache directory (and its lock file)."""
    name = Path(path).name
    return name.startswith(tuple(f"{what}-" for what in _SUFFIX)) or name == ".emu-shared.lock"


def _build_shared(what, d, key, extra_flags):
    """Compile the runtime's object file or a precompiled header into `d` (a private scratch
    directory, then renamed into place: a precompiled header keeps its own directory, as g++
    finds it beside the header's name). A precompiled header is an optimisation: a compiler
    that cannot make one leaves None."""
    build = tempfile.mkdtemp(prefix=f".{what}-{key}.", suffix=".build", dir=d)  # mode 0700
    try:
        if what == "emu_runtime":
            out = os.path.join(build, "runtime.o")
            cmd = [CXX, *flags(), *extra_flags, "-c", "-I", str(HERE), str(RUNTIME), "-o", out]
        else:
            header = HEADER if what == "emu_pch" else HOST_HEADER
            out = os.path.join(build, header.name + ".gch")
            cmd = [CXX, *flags(), *extra_flags, "-x", "c++-header", str(header), "-o", out]
        r = _run_compiler(cmd, what)
        if r.returncode != 0:
            if what != "emu_runtime":
                return None
            raise EmuCompileError(f"g++ failed to compile the emulator's runtime:\n{r.stderr}")
        with open(out, "rb") as f:
            data = f.read()
        sha = hashlib.sha256(data).hexdigest()
        name = _library_name(what, key, sha, _SUFFIX[what])
        if what == "emu_runtime":
            files.atomic_write(Path(d) / name, lambda f: f.write(data), 0o600)
        else:
            os.chmod(out, 0o600)
            try:
                os.rename(build, Path(d) / Path(name).parent)   # the whole directory, at once
            except OSError:   # another process put the same one there first
                pass
        manifest = {"format": MANIFEST_FORMAT, "key": key, "library": name, "size": len(data),
                    "sha256": sha}
        text = (json.dumps(manifest) + "\n").encode()
        files.atomic_write(manifest_path(d, what, key), lambda f: f.write(text), 0o600)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return verified_library(d, what, key, _SUFFIX[what])


def _read_private(path, limit=None):
    """The bytes of `path` if it is a regular file (not a symlink) owned by the
    current user and not writable by group or others, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0))   # no hanging on a FIFO, no symlinks
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022
                or (limit is not None and st.st_size > limit)):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def verified_library(d, stem, key, suffix=".so"):
    """The path of the cached library for (stem, key) if its manifest and the library
    pass every check (ownership, permissions, size, sha256), else None. `suffix`: ".so", or
    a shared part's (`shared_parts`)."""
    raw = _read_private(manifest_path(d, stem, key), limit=1 << 16)
    if raw is None:
        return None
    try:
        m = json.loads(raw)
        batch = m.get("batch")   # a library built with other sources (build_libraries)
        ok = (m["format"] == MANIFEST_FORMAT and m["key"] == key
              and m["library"] == (_library_name(stem, key, m["sha256"], suffix)
                                   if batch is None else
                                   _library_name(BATCH_STEM, _hex(batch), m["sha256"])))
    except (ValueError, KeyError, TypeError):
        return None
    if not ok:
        return None
    lib = Path(d) / m["library"]
    if lib.parent != Path(d) and not _private_directory(lib.parent):
        return None
    data = _read_private(lib)
    if data is None or len(data) != m["size"] or hashlib.sha256(data).hexdigest() != m["sha256"]:
        return None
    return lib


def _private_directory(path):
    """True if `path` is a directory (not a symlink) owned by the current user and not
    writable by group or others."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _hex(key):
    if not (isinstance(key, str) and re.fullmatch(r"[0-9a-f]{24}", key)):
        raise ValueError(f"not a content hash: {key!r}")
    return key


def _library_name(stem, key, sha, suffix=".so"):
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise ValueError(f"not a sha256: {sha!r}")
    return f"{stem}-{key}-{sha[:16]}{suffix}"


_MATH = "#include <math.h>\n"


def _run_compiler(cmd, what):
    """The finished compiler process of `cmd`; EmuCompileError when it runs past
    COMPILE_TIMEOUT_S (it is killed)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise EmuCompileError(f"{cmd[0]} did not finish compiling {what} in "
                              f"{COMPILE_TIMEOUT_S} s and was stopped") from None


def _compile(text, d, stem, key, extra_flags, emulated=True):
    """Build the library in a private scratch directory inside `d`, then move it and
    its manifest into place (each atomically: library first, manifest last). `emulated`:
    with the emulator's header and runtime."""
    build = tempfile.mkdtemp(prefix=f".{stem}-{key}.", suffix=".build", dir=d)  # mode 0700
    src, out = os.path.join(build, stem + ".cpp"), os.path.join(build, stem + ".so")
    try:
        Path(src).write_text(text)
        if emulated:   # the precompiled header first on the path, the runtime linked in
            runtime, pch = shared_parts(d, extra_flags)
            inputs = (*(("-I", str(pch)) if pch is not None else ()), "-I", str(HERE), src,
                      str(runtime))
        elif text.startswith(_MATH):   # the same header, precompiled (150 ms of parsing less)
            pch = host_pch(d, extra_flags)
            if pch is not None:
                Path(src).write_text(f'#include "{HOST_HEADER.name}"\n' + text[len(_MATH):])
            inputs = (*(("-I", str(pch), "-I", str(HERE)) if pch is not None else ()), src)
        else:
            inputs = (src,)
        # the scratch directory's random name is mapped away, so builds are reproducible
        # and the library's own name is fixed (gold records the output's path otherwise)
        cmd = [CXX, *flags(), *extra_flags, f"-ffile-prefix-map={build}=.", "-shared",
               f"-Wl,-soname,{stem}.so", *inputs, "-o", out]
        r = _link(cmd, f"{stem}-{key}")
        if r.returncode != 0:
            raise EmuCompileError(f"g++ failed to compile {stem}-{key}"
                                  f"{' for the emulator' if emulated else ''}:\n"
                                  + r.stderr.replace(src, "<generated>"))
        with open(out, "rb") as f:
            data = f.read()
        sha = hashlib.sha256(data).hexdigest()
        target = Path(d) / _library_name(stem, key, sha)
        files.atomic_write(target, lambda f: f.write(data), 0o700)
        manifest = {"format": MANIFEST_FORMAT, "key": key, "library": target.name,
                    "size": len(data), "sha256": sha}
        text = (json.dumps(manifest) + "\n").encode()
        files.atomic_write(manifest_path(d, stem, key), lambda f: f.write(text), 0o600)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return target
