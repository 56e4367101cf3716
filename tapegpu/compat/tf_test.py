"""`tf.test.TestCase`, `tf.test.main`, `tf.test.Benchmark`: imported when first used (as
`tg.test.TestCase`, ...), so that `import tapegpu` does not import unittest."""
import contextlib
import unittest

import numpy as np


class TestCase(unittest.TestCase):
    """`tf.test.TestCase`: unittest's TestCase with TensorFlow's assertions on tensors and
    arrays (`assertAllClose`, `assertAllEqual`, `assertShapeEqual`, ...) and `evaluate`.

    >>> class T(tg.test.TestCase):
    ...     def test_it(self):
    ...         self.assertAllClose(tg.constant([1.0, 2.0]), [1.0, 2.0 + 1e-7])
    >>> import io, unittest
    >>> unittest.TextTestRunner(stream=io.StringIO()).run(T("test_it")).wasSuccessful()
    True
    """

    @staticmethod
    def _np(x):
        if hasattr(x, "numpy"):
            return x.numpy()
        if isinstance(x, (list, tuple)):
            return np.asarray([TestCase._np(v) for v in x]) if x else np.asarray(x)
        return np.asarray(x)

    def evaluate(self, tensors):
        """The tensors' values as numpy (structures kept)."""
        from ..core import nest
        return nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, tensors)

    def assertAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):  # noqa: N802
        np.testing.assert_allclose(self._np(a), self._np(b), rtol=rtol, atol=atol,
                                   err_msg=msg or "")

    def assertAllEqual(self, a, b, msg=None):  # noqa: N802
        a, b = self._np(a), self._np(b)
        self.assertEqual(a.shape, b.shape, msg)
        np.testing.assert_array_equal(a, b, err_msg=msg or "")

    def assertNotAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):  # noqa: N802
        if np.allclose(self._np(a), self._np(b), rtol=rtol, atol=atol):
            raise self.failureException(msg or "the values are all close")

    def assertNotAllEqual(self, a, b, msg=None):  # noqa: N802
        if np.array_equal(self._np(a), self._np(b)):
            raise self.failureException(msg or "the values are all equal")

    def assertAllGreater(self, a, comparison_target):  # noqa: N802
        self.assertTrue(np.all(self._np(a) > comparison_target))

    def assertAllLess(self, a, comparison_target):  # noqa: N802
        self.assertTrue(np.all(self._np(a) < comparison_target))

    def assertAllGreaterEqual(self, a, comparison_target):  # noqa: N802
        self.assertTrue(np.all(self._np(a) >= comparison_target))

    def assertAllLessEqual(self, a, comparison_target):  # noqa: N802
        self.assertTrue(np.all(self._np(a) <= comparison_target))

    def assertAllInRange(self, target, lower_bound, upper_bound, open_lower_bound=False,  # noqa: N802
                         open_upper_bound=False):
        t = self._np(target)
        lo = t > lower_bound if open_lower_bound else t >= lower_bound
        hi = t < upper_bound if open_upper_bound else t <= upper_bound
        self.assertTrue(np.all(lo & hi), f"values outside [{lower_bound}, {upper_bound}]")

    def assertShapeEqual(self, input_a, input_b, msg=None):  # noqa: N802
        self.assertEqual(tuple(np.shape(self._np(input_a))), tuple(input_b.shape), msg)

    def assertDTypeEqual(self, target, expected_dtype):  # noqa: N802
        self.assertEqual(np.dtype(self._np(target).dtype), np.dtype(
            getattr(expected_dtype, "as_numpy_dtype", expected_dtype)))

    def assertArrayNear(self, farray1, farray2, err, msg=None):  # noqa: N802
        np.testing.assert_allclose(self._np(farray1), self._np(farray2), atol=err, rtol=0)

    def assertNear(self, f1, f2, err, msg=None):  # noqa: N802
        self.assertTrue(abs(f1 - f2) <= err, msg or f"{f1} != {f2} +/- {err}")

    @contextlib.contextmanager
    def cached_session(self, *args, **kwargs):
        """A context yielding the test itself (its `evaluate` runs tensors), as TF's in eager
        mode."""
        yield self

    session = cached_session

    def get_temp_dir(self):
        import tempfile
        if not hasattr(self, "_tempdir"):
            self._tempdir = tempfile.mkdtemp()
        return self._tempdir


def main(argv=None):
    """Runs the tests of `__main__` (`tf.test.main`: unittest.main)."""
    return unittest.main(argv=argv)


class Benchmark:
    """`tf.test.Benchmark`: subclasses' `benchmark*` methods time code; `report_benchmark`
    records (and prints) a result, and `evaluate` runs tensors.

    >>> tg.test.Benchmark().report_benchmark(name="x", iters=1, wall_time=0.5)["wall_time"]
    0.5
    """

    def report_benchmark(self, iters=None, cpu_time=None, wall_time=None, throughput=None,
                         extras=None, name=None, metrics=None):
        entry = {"name": name or type(self).__name__, "iters": iters, "cpu_time": cpu_time,
                 "wall_time": wall_time, "throughput": throughput, "extras": extras or {},
                 "metrics": metrics or []}
        self.__dict__.setdefault("reports", []).append(entry)
        return entry

    def evaluate(self, tensors):
        return TestCase.evaluate(self, tensors)

    def run_op_benchmark(self, sess, op_or_tensor, feed_dict=None, burn_iters=2, min_iters=10,
                         store_trace=False, store_memory_usage=True, name=None, extras=None,
                         mbs=0):
        raise NotImplementedError(
            "tf.test.Benchmark.run_op_benchmark is not available in tapegpu: it times a TF1 "
            "session's op. Instead: time a Python callable with timeit and call "
            "report_benchmark")


def benchmark_config():
    """A settings bag (tapegpu has no session config to fill)."""
    from .v1 import ConfigProto
    return ConfigProto()
