"""Compile a ``.cu`` file with NVRTC (the compiler CuPy uses at run time).

No GPU or driver is needed: NVRTC turns CUDA C into PTX on any machine. This
is the check that a kernel tested only in the emulator (compiled there by g++)
is also valid CUDA. It needs the PyPI packages ``cuda-bindings`` and
``nvidia-cuda-nvrtc``; without them ``available()`` is False and ``reason()``
says why::

    >>> from tapegpu.backends.kernels import nvrtc
    >>> nvrtc.status()            # doctest: +SKIP
    'NVRTC 13.5'
"""

import ctypes
import glob
import os
import re

ARCHS = ("compute_80", "compute_90")
_WARNING = re.compile(r"\bwarning\b", re.IGNORECASE)  # "x.cu(3): warning #177-D: ..."
_module = None
_error = None


class NvrtcError(RuntimeError):
    """NVRTC rejected a source; the message carries its log."""


def _preload_wheel_libraries():
    """Load libnvrtc and its builtins from the nvidia-cuda-nvrtc wheel, if it is
    installed, so that cuda-bindings finds them without a CUDA toolkit on the
    library path (and NVRTC finds its builtins under an LD_PRELOADed ASan)."""
    try:
        import nvidia
    except ImportError:
        return
    for root in getattr(nvidia, "__path__", []):
        for pattern in ("libnvrtc-builtins.so*", "libnvrtc.so*"):
            for lib in sorted(glob.glob(os.path.join(root, "*", "lib", pattern))):
                try:
                    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
                    break
                except OSError:
                    continue


def _load():
    global _module, _error
    if _module is not None or _error is not None:
        return _module
    try:
        from cuda.bindings import nvrtc as module
    except ImportError as e:
        _error = f"cuda-bindings is not installed ({e}); pip install cuda-bindings nvidia-cuda-nvrtc"
        return None
    _preload_wheel_libraries()
    try:
        _check(module, module.nvrtcVersion())
    except Exception as e:  # the binding imports but the shared library is missing
        _error = f"libnvrtc cannot be loaded ({e}); pip install nvidia-cuda-nvrtc"
        return None
    _module = module
    return module


def available():
    return _load() is not None


def reason():
    """Why NVRTC is unavailable ('' when it is available)."""
    _load()
    return _error or ""


def status():
    """'NVRTC <major>.<minor>' or 'unavailable: <reason>' (for `python -m tapegpu info`)."""
    m = _load()
    if m is None:
        return f"unavailable: {_error}"
    _, major, minor = m.nvrtcVersion()
    return f"NVRTC {major}.{minor}"


def _check(module, result):
    """Unpack a cuda.bindings result tuple, raising on an error code."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != module.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcError(f"{err.name if hasattr(err, 'name') else err}")
    return rest[0] if len(rest) == 1 else rest


def compile_source(source, name="kernel.cu", arch="compute_80", options=()):
    """Compile CUDA C to PTX, warnings as errors.

    Returns (ptx, entry_names). Raises NvrtcError with the compiler log, or
    RuntimeError when NVRTC is unavailable. A warning in the log fails the compile here,
    not by NVRTC's own option: NVRTC 12 and 13.1+ take `-Werror=all-warnings`, 13.0
    refuses it as an unknown option."""
    m = _load()
    if m is None:
        raise RuntimeError(f"NVRTC unavailable: {_error}")
    opts = [f"--gpu-architecture={arch}", "-std=c++17", *options]
    prog = _check(m, m.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []))
    try:
        result = m.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        size = _check(m, m.nvrtcGetProgramLogSize(prog))
        # NVRTC writes into the buffer: a bytearray of our own. (`b" " * size` is, for size 1,
        # the interpreter's shared b" ": NVRTC's terminating NUL turned every b" " into b"\0".)
        log = bytearray(size)
        _check(m, m.nvrtcGetProgramLog(prog, log))
        text = log.decode(errors="replace").rstrip("\x00 \n")
        if result[0] != m.nvrtcResult.NVRTC_SUCCESS or _WARNING.search(text):
            raise NvrtcError(f"NVRTC failed to compile {name} for {arch}:\n{text}")
        size = _check(m, m.nvrtcGetPTXSize(prog))
        ptx = bytearray(size)
        _check(m, m.nvrtcGetPTX(prog, ptx))
    finally:
        m.nvrtcDestroyProgram(prog)
    ptx = bytes(ptx).decode().rstrip("\x00")
    return ptx, entry_names(ptx)


def compile_file(path, arch="compute_80", options=()):
    with open(path) as f:
        return compile_source(f.read(), os.path.basename(path), arch, options)


def entry_names(ptx):
    """The kernel entry points (``.entry NAME(``) of a PTX module."""
    return sorted(set(re.findall(r'\.entry\s+([\w$]+)', ptx)))
