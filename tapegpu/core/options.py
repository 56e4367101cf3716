"""Switches of tapegpu's machinery, in one object: tests and benchmarks turn a path off to
compare it with another, and a debugger hooks the replay. Nothing a program needs for its
results; the defaults are what every user runs.

    from tapegpu.core.options import options
    with options(array_sweep=False):   # the reverse sweep on tensors only
        ...
"""
import contextlib
import os


class Options:
    """The switches (each documented where it is read):

    * `array_sweep` (autodiff/sweep.py): a sweep that no tape records runs on raw arrays;
    * `in_place` (autodiff/sweep.py): the sweep accumulates into cotangent buffers it owns;
    * `rewrites` (function/rewrite.py): tg.function applies the ops' algebraic rewrites;
    * `diagonal` (function/diagonal.py): tg.function propagates diagonal Jacobian values;
    * `on_step` (function/graph.py): None, or `on_step(values)` called after every step of a
      replay (values by id), which then runs step by step;
    * `compile_in_background` (function/fusion.py): a tg.function whose generated CPU kernels
      are not in the build cache replays unfused until a background thread has compiled them;
    * `fusion` (function/fusion.py): tg.function fuses elementwise groups into generated
      kernels (`TAPEGPU_FUSION=0` at start: off);
    * `capture` (function/capture.py): `jit_compile=True` replays a CUDA graph where it can
      (`TAPEGPU_CAPTURE=0` at start: off).
    """

    __slots__ = ("array_sweep", "in_place", "rewrites", "diagonal", "on_step",
                 "compile_in_background", "fusion", "capture")

    def __init__(self):
        self.array_sweep = True
        self.in_place = True
        self.rewrites = True
        self.diagonal = True
        self.on_step = None
        self.compile_in_background = True
        self.fusion = os.environ.get("TAPEGPU_FUSION", "1") != "0"
        self.capture = os.environ.get("TAPEGPU_CAPTURE", "1") != "0"

    @contextlib.contextmanager
    def __call__(self, **changes):
        """Sets switches for the `with` block, restoring them after it."""
        unknown = set(changes) - set(self.__slots__)
        if unknown:
            raise TypeError(f"options: no switch {sorted(unknown)}; the switches are "
                            f"{list(self.__slots__)}")
        before = {k: getattr(self, k) for k in changes}
        for k, v in changes.items():
            setattr(self, k, v)
        try:
            yield self
        finally:
            for k, v in before.items():
                setattr(self, k, v)

    def __repr__(self):
        return "options(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


options = Options()
