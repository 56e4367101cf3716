"""Stream capture on `cuda_emu`: the emulator's counterpart of CuPy's `Stream.begin_capture()`,
`end_capture()` and `Graph.launch()`, so that tg.function's capture logic
(tapegpu/function/capture.py) runs, and is tested, without a GPU.

On a GPU the driver records every launch issued on a capturing stream, with its buffers, and a
graph launch replays them. The emulator's library calls are numpy calls it cannot intercept, so
the capturing code records each launch group itself: `record(fn, ins, outs, launches)` says
that `fn(*ins)` issued `launches` ({kernel or op name: count}) and produced the arrays `outs`.
`Graph.launch()` replays the sequence on the same buffers (each `fn` on the recorded inputs,
its results copied into the recorded outputs), checks that it issued exactly the recorded
launches, and counts the whole replay as one launch, `cuda_graph`, as a GPU's launch counter
would see one `cudaGraphLaunch`.

As on a GPU: one capture per stream at a time, `end_capture` only on a capturing stream, and a
host read or synchronisation of the device while it captures raises `CaptureError` (the
backend's `to_numpy` and `synchronize` check `capturing`). Unlike a GPU, the recorded work also
runs while it is captured (`EXECUTES_WHILE_CAPTURING`): numpy computes as it is called.
"""
import collections

import numpy as np

EXECUTES_WHILE_CAPTURING = True
GRAPH_LAUNCH = "cuda_graph"


class CaptureError(RuntimeError):
    """An operation the CUDA runtime refuses on (or outside) a capturing stream."""


class Stream:
    """A stream of the `cuda_emu` device `dev` that can capture (cf. `cupy.cuda.Stream`)."""

    def __init__(self, dev):
        self.dev = dev
        self._nodes = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def is_capturing(self):
        return self._nodes is not None

    def begin_capture(self):
        if self._nodes is not None:
            raise CaptureError("cudaErrorIllegalState: the stream is already capturing")
        if getattr(self.dev, "capturing", None) is not None:
            raise CaptureError("cudaErrorStreamCaptureUnsupported: another stream of this "
                               "device is capturing")
        self._nodes = []
        self.dev.capturing = self

    def record(self, fn, ins, outs, launches):
        """One launch group of the capture: `fn(*ins)` returned `outs` issuing `launches`."""
        if self._nodes is None:
            raise CaptureError("record: the stream is not capturing")
        self._nodes.append((fn, tuple(ins), tuple(outs), dict(launches)))

    def end_capture(self):
        if self._nodes is None:
            raise CaptureError("cudaErrorIllegalState: end_capture on a stream that is not "
                               "capturing")
        nodes, self._nodes = self._nodes, None
        self.dev.capturing = None
        return Graph(self.dev, nodes)

    def abort(self):
        """Ends a capture that failed (the runtime invalidates it)."""
        self._nodes = None
        if getattr(self.dev, "capturing", None) is self:
            self.dev.capturing = None


class Graph:
    """The launches of one capture, replayed on their buffers by `launch()`."""

    def __init__(self, dev, nodes):
        self.dev = dev
        self.nodes = nodes
        self.launches = collections.Counter()
        for *_, counts in nodes:
            self.launches.update(counts)

    def launch(self):
        counter = self.dev.launches
        before = collections.Counter(counter)
        for fn, ins, outs, _ in self.nodes:
            results = fn(*ins)
            if len(outs) == 1 and not isinstance(results, (list, tuple)):
                results = (results,)
            for out, r in zip(outs, results):
                if r is not out:
                    np.copyto(out, r, casting="no")
        issued = collections.Counter(counter)
        issued.subtract(before)
        issued = {k: v for k, v in issued.items() if v}
        if issued != {k: v for k, v in self.launches.items() if v}:
            raise CaptureError(f"graph replay issued {issued}, not the captured launches "
                               f"{dict(self.launches)}")
        counter.clear()
        counter.update(before)
        counter[GRAPH_LAUNCH] += 1
