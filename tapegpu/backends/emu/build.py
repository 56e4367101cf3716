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
generated source, shim header, runtime, flags and compiler version. A build
writes to a temporary name and renames it into place, so two processes building
the same library at once both end up loading a complete file.
"""

import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = HERE / "cuda_emu.h"
RUNTIME = HERE / "runtime.cpp"

CXX = os.environ.get("CXX", "g++")
BASE_FLAGS = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-fno-gnu-unique",
              "-fno-strict-aliasing", "-fstack-clash-protection", "-g1"]


class EmuCompileError(RuntimeError):
    """g++ rejected a kernel source (the message carries the compiler output)."""


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
    name = filename.replace("\\", "/").replace('"', "")
    parts = ['#include "cuda_emu.h"', f'#line 1 "{name}"', rewrite(source, filename),
             "#line 1 \"<emulator launcher>\""]
    for k in kernels:
        parts.append(
            f"EMU_EXPORT int emu_launch_{k}(const long long *config, void **args) {{\n"
            f"  return emu_run(config, args, [](void **emu_args) {{ emu_invoke({k}, emu_args); }});\n}}\n"
            f"EMU_EXPORT const char *emu_signature_{k}(void) {{ return emu_signature({k}); }}")
    for c in constants:
        parts.append(f"EMU_EXPORT void *emu_global_{c}(size_t *size) "
                     f"{{ *size = sizeof({c}); return (void *)&{c}; }}")
    manifest = json.dumps({"hash": key, "kernels": kernels, "constants": constants})
    parts.append(f"EMU_EXPORT const char *emu_manifest(void) {{ return {json.dumps(manifest)}; }}")
    return "\n".join(parts) + "\n"


@functools.lru_cache(maxsize=None)
def compiler_version():
    try:
        out = subprocess.run([CXX, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise EmuCompileError(f"the emulator needs a C++ compiler ({CXX!r}): {e}") from e
    return out.stdout.splitlines()[0]


def cache_dir():
    d = os.environ.get("TAPEGPU_EMU_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "tapegpu", "emu")
    os.makedirs(d, exist_ok=True)
    return Path(d)


def flags():
    """Compile flags; TAPEGPU_EMU_ASAN=1 adds AddressSanitizer, TAPEGPU_EMU_UCONTEXT=1
    selects the portable (slower) context switch."""
    f = list(BASE_FLAGS)
    if os.environ.get("TAPEGPU_EMU_ASAN") == "1":
        f += ["-fsanitize=address", "-fno-omit-frame-pointer"]
    if os.environ.get("TAPEGPU_EMU_UCONTEXT") == "1":
        f += ["-DEMU_UCONTEXT=1"]
    return f


def content_hash(source, extra_flags=()):
    h = hashlib.sha256()
    for part in (source, HEADER.read_text(), RUNTIME.read_text(), Path(__file__).read_text(),
                 " ".join(flags() + list(extra_flags)), compiler_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def build_library(source, filename, extra_flags=()):
    """Compile (or find in the cache) the library for `source`.

    Returns (library path, content hash). The library's `emu_manifest()`
    lists its kernels (with parameter names) and constants as JSON."""
    key = content_hash(source, extra_flags)
    stem = re.sub(r'\W', '_', Path(filename).stem)[:40]
    target = cache_dir() / f"{stem}-{key}.so"
    if not target.exists():
        kernels, constants = parse(preprocess(source, extra_flags))
        _compile(generate(source, filename, kernels, constants, key), target, extra_flags)
    return target, key


def _compile(text, target, extra_flags):
    fd, tmp = tempfile.mkstemp(prefix=target.stem + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    src = tmp + ".cpp"
    try:
        Path(src).write_text(text)
        cmd = [CXX, *flags(), *extra_flags, "-shared", "-I", str(HERE), src, str(RUNTIME), "-o", tmp]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise EmuCompileError(f"g++ failed to compile {target.stem} for the emulator:\n"
                                  + r.stderr.replace(src, "<generated>"))
        os.replace(tmp, target)
    finally:
        for p in (tmp, src):
            if os.path.exists(p):
                os.unlink(p)
