"""Control flow in eager execution: `cond`, `while_loop`, `map_fn`, `scan`, `foldl`, `foldr`,
`switch_case`, with TensorFlow's names, arguments and structure rules.

Eagerly, a branch or an iteration is a Python call on tensors: every op it runs is recorded by
the active tapes and accumulators, so gradients (reverse and forward mode) flow through the
branch taken and every iteration run, as in TensorFlow's eager mode. Arguments that only shape
graph building in TensorFlow (`parallel_iterations`, `swap_memory`, `back_prop`,
`shape_invariants`) are accepted and checked, not needed.

`TensorArray` is TensorFlow's loop accumulator: a list of tensors of one dtype written per
index, stacked at the end; its reads and stacks are ops on the written tensors, so they are
differentiable and recorded by `tg.function` traces.
"""
from ..core import dtypes, nest
from ..core.tensor import Tensor, Variable, _thread, convert_to_tensor
from ..errors import OutOfRangeError
from ._base import public
from .creation import zeros
from .registry import InvalidArgumentError
from .shape import concat, split, stack, unstack


def _truth(pred, op):
    """A Python bool from a bool scalar (a tensor or a Python bool), as TF's eager predicate."""
    if isinstance(pred, (Tensor, Variable)):
        t = convert_to_tensor(pred)
        if t.shape != () or t.dtype.name != "bool":
            raise InvalidArgumentError(f"{op}: the predicate must be a bool scalar, got "
                                       f"{t.dtype.name} of shape {t.shape}")
        return bool(t.numpy())
    if isinstance(pred, bool):
        return pred
    raise TypeError(f"{op}: the predicate must be a bool scalar tensor or a Python bool, got "
                    f"{type(pred).__name__}")


def cond(pred, true_fn=None, false_fn=None, name=None):
    """`true_fn()` if `pred` else `false_fn()`, as tf.cond (eagerly: only the branch taken runs).

    >>> x = tg.constant(2.0)
    >>> float(tg.cond(x > 1.0, lambda: x * 10.0, lambda: x))
    20.0
    """
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond: true_fn and false_fn must be callables")
    return true_fn() if _truth(pred, "cond") else false_fn()


def switch_case(branch_index, branch_fns, default=None, name=None):
    """`branch_fns[branch_index]()`, or `default()` for an index out of range (else the last
    branch, as TF), as tf.switch_case; `branch_fns` may be a list or a dict {int: fn}.

    >>> float(tg.switch_case(tg.constant(1), [lambda: tg.constant(1.0), lambda: tg.constant(2.0)]))
    2.0
    """
    fns = dict(branch_fns) if isinstance(branch_fns, dict) else dict(enumerate(branch_fns))
    if not fns or not all(callable(f) for f in fns.values()):
        raise TypeError("switch_case: branch_fns must be a non-empty list or dict of callables")
    i = convert_to_tensor(branch_index) if not isinstance(branch_index, int) else branch_index
    if isinstance(i, Tensor):
        if i.shape != () or i.dtype.name not in ("int32", "int64"):
            raise InvalidArgumentError(f"switch_case: branch_index must be an int32 or int64 "
                                       f"scalar, got {i.dtype.name} of shape {i.shape}")
        i = int(i.numpy())
    if i in fns:
        return fns[i]()
    return default() if default is not None else fns[max(fns)]()


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,
               back_prop=True, swap_memory=False, maximum_iterations=None, name=None):
    """Repeats `loop_vars = body(*loop_vars)` while `cond(*loop_vars)`, at most
    `maximum_iterations` times, as tf.while_loop; returns the loop variables in their structure.
    `body` must return the structure of `loop_vars`, with the same dtypes (TF's rule).

    >>> i, total = tg.while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s + i),
    ...                          (tg.constant(0), tg.constant(0)))
    >>> int(i), int(total)
    (4, 6)
    """
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop: cond and body must be callables")
    if parallel_iterations is not None and int(parallel_iterations) < 1:
        raise ValueError(f"while_loop: parallel_iterations must be positive, got "
                         f"{parallel_iterations}")
    single = not isinstance(loop_vars, (list, tuple))
    args = [loop_vars] if single else list(loop_vars)
    n = 0
    while (maximum_iterations is None or n < int(maximum_iterations)) and \
            _truth(cond(*args), "while_loop"):
        new = body(*args)
        # as TF, a body of one loop variable may return it bare
        new_args = list(new) if isinstance(new, (list, tuple)) and not single else [new]
        _check_structure(args, new_args)
        args = new_args
        n += 1
    if single:
        return args[0]
    return nest.pack_sequence_as(loop_vars, nest.flatten(args))


def _check_structure(old, new):
    """body's result has the loop variables' structure and dtypes (TF raises otherwise)."""
    try:
        nest.assert_same_structure(old, new, check_types=False)
    except (ValueError, TypeError) as e:
        raise ValueError(f"while_loop: body must return the structure of loop_vars: {e}") \
            from None
    for a, b in zip(nest.flatten(old), nest.flatten(new)):
        if isinstance(a, (Tensor, Variable)) and isinstance(b, (Tensor, Variable)) and \
                a.dtype != b.dtype:
            raise TypeError(f"while_loop: a loop variable of dtype {a.dtype.name} became "
                            f"{b.dtype.name} in body; loop variables keep their dtypes")


def _elements(elems, op, reverse=False):
    """The elements of a (nested) structure of tensors along axis 0, as structures."""
    flat = [convert_to_tensor(e) for e in nest.flatten(elems)]
    if not flat:
        raise ValueError(f"{op}: elems must hold at least one tensor")
    n = {t.shape[0] if t.ndim else None for t in flat}
    if None in n or len(n) != 1:
        raise ValueError(f"{op}: every tensor of elems must have the same size along axis 0, "
                         f"got shapes {[t.shape for t in flat]}")
    rows = [unstack(t) for t in flat]
    order = range(len(rows[0]) - 1, -1, -1) if reverse else range(len(rows[0]))
    return [nest.pack_sequence_as(elems, [r[i] for r in rows]) for i in order]


def _stacked(results, op):
    if not results:
        raise ValueError(f"{op}: elems have no rows; the output's shape is unknown")
    flat = [nest.flatten(r) for r in results]
    return nest.pack_sequence_as(results[0], [stack(list(col)) for col in zip(*flat)])


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False,
           infer_shape=True, name=None, fn_output_signature=None):
    """`fn` applied to each element of `elems` along axis 0, the results stacked, as tf.map_fn
    (`elems` and the results may be nested structures).

    >>> tg.map_fn(lambda x: x * x, tg.constant([1.0, 2.0, 3.0])).numpy()
    array([1., 4., 9.], dtype=float32)
    """
    return _stacked([fn(e) for e in _elements(elems, "map_fn")], "map_fn")


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
         swap_memory=False, infer_shape=True, reverse=False, name=None):
    """The accumulators `acc = fn(acc, x)` over the elements of `elems` (the first element is
    the initial accumulator when `initializer` is None), stacked, as tf.scan.

    >>> tg.scan(lambda a, x: a + x, tg.constant([1.0, 2.0, 3.0])).numpy()
    array([1., 3., 6.], dtype=float32)
    """
    xs = _elements(elems, "scan", reverse)
    acc, rest = (xs[0], xs[1:]) if initializer is None else (initializer, xs)
    accs = [acc] if initializer is None else []
    for x in rest:
        acc = fn(acc, x)
        accs.append(acc)
    out = _stacked(accs, "scan")
    if reverse:
        out = nest.map_structure(lambda t: stack(unstack(t)[::-1]), out)
    return out


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """`fn(acc, x)` folded over the elements of `elems` from the first, as tf.foldl.

    >>> float(tg.foldl(lambda a, x: a * x, tg.constant([1.0, 2.0, 3.0, 4.0])))
    24.0
    """
    return _fold(fn, _elements(elems, "foldl"), initializer)


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """`fn(acc, x)` folded over the elements of `elems` from the last, as tf.foldr.

    >>> float(tg.foldr(lambda a, x: a - x, tg.constant([1.0, 2.0, 10.0])))
    7.0
    """
    return _fold(fn, _elements(elems, "foldr", reverse=True), initializer)


def _fold(fn, xs, initializer):
    acc, rest = (xs[0], xs[1:]) if initializer is None else (initializer, xs)
    for x in rest:
        acc = fn(acc, x)
    return acc


def _index(i, what):
    """A Python int from an int or an integer scalar tensor (TF's int32 index)."""
    if isinstance(i, (Tensor, Variable)):
        t = convert_to_tensor(i)
        if t.shape != () or t.dtype.name not in ("int32", "int64"):
            raise InvalidArgumentError(f"TensorArray.{what}: the index must be an int32 scalar, "
                                       f"got {t.dtype.name} of shape {t.shape}")
        return int(t)
    if isinstance(i, bool) or not isinstance(i, int):
        try:
            return int(i.__index__())
        except (AttributeError, TypeError):
            raise TypeError(f"TensorArray.{what}: the index must be an int or an int32 scalar "
                            f"tensor, got {type(i).__name__}") from None
    return i


def _shape_or_none(shape):
    return None if shape is None else tuple(None if d is None else int(d) for d in shape)


def _compatible(a, b):
    return a is None or b is None or (len(a) == len(b) and all(
        x is None or y is None or x == y for x, y in zip(a, b)))


def _merge(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return tuple(y if x is None else x for x, y in zip(a, b))


class TensorArray:
    """A list of tensors of one dtype, written per index and read, stacked or concatenated
    (TensorFlow's `tf.TensorArray`): the accumulator of loops.

    As TF's eager TensorArray, `write`, `unstack`, `scatter` and `split` change the array and
    return it; write `ta = ta.write(i, x)` as TF's guide does (so the code also reads right as a
    functional update). Reads, `stack`, `gather` and `concat` are ops on the written tensors:
    gradients flow through them, and a `tg.function` trace records them. `size` is required;
    `dynamic_size=True` lets writes grow the array. `clear_after_read` (default True) frees an
    element when it is read: reading it again raises (eagerly; an array made inside a
    `tg.function` keeps its elements, as TF's graph TensorArray does). An element never written reads as zeros of
    `element_shape` when that shape is known (inferred from the writes unless
    `infer_shape=False`). Unlike TF's eager TensorArray, which silently replaces the value,
    writing an index twice raises InvalidArgumentError (the write-once rule of TF's graph
    TensorArray): the first value's gradient would otherwise be lost without a word.

    >>> ta = tg.TensorArray(tg.float32, size=0, dynamic_size=True)
    >>> for i in range(3):
    ...     ta = ta.write(i, tg.constant(float(i * i)))
    >>> ta.stack().numpy()
    array([0., 1., 4.], dtype=float32)
    """

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None,
                 tensor_array_name=None, handle=None, flow=None, infer_shape=True,
                 element_shape=None, colocate_with_first_write_call=True, name=None):
        if handle is not None or flow is not None:
            raise ValueError("TensorArray: handle and flow are graph-mode arguments of "
                             "TensorFlow; tapegpu's TensorArray holds its tensors directly")
        if size is None:
            raise ValueError("TensorArray: size must be declared (0 with dynamic_size=True "
                             "for an array that grows)")
        size = _index(size, "__init__")
        if size < 0:
            raise InvalidArgumentError(f"TensorArray: size must be non-negative, got {size}")
        self._dtype = dtypes.as_dtype(dtype)
        self._dynamic_size = bool(dynamic_size)
        # inside a tg.function trace reads never clear, as TF's graph TensorArray (a list)
        self._clear_after_read = (True if clear_after_read is None else
                                  bool(clear_after_read)) and not _thread.tracers
        self._infer_shape = bool(infer_shape)
        self._element_shape = _shape_or_none(element_shape)
        self._elements = [None] * size
        self._written = set()
        self._cleared = set()

    @property
    def dtype(self):
        return self._dtype

    @property
    def element_shape(self):
        """The elements' shape as known so far (a tuple, None for unknown dimensions), or None
        when not even the rank is known."""
        return self._element_shape

    @property
    def dynamic_size(self):
        return self._dynamic_size

    def identity(self):
        """The array itself (TensorFlow's name)."""
        return self

    def size(self, name=None):
        """The number of elements, an int32 scalar tensor."""
        return convert_to_tensor(len(self._elements), dtype=dtypes.int32)

    # -- writing ----------------------------------------------------------------------------------
    def _write(self, index, value, what):
        i = _index(index, what)
        if i < 0:
            raise OutOfRangeError(f"TensorArray.{what}: writing to negative indices (index {i}) "
                                  f"is not allowed")
        if i >= len(self._elements):
            if not self._dynamic_size:
                raise OutOfRangeError(f"TensorArray.{what}: tried to write to index {i} but "
                                      f"the array is not resizeable and its size is "
                                      f"{len(self._elements)} (dynamic_size=False)")
            self._elements.extend([None] * (i + 1 - len(self._elements)))
        if i in self._written:
            raise InvalidArgumentError(f"TensorArray.{what}: could not write to index {i} "
                                       f"because it has already been written to (a "
                                       f"TensorArray is write-once per index)")
        if isinstance(value, Variable):
            value = value._read()
        if not isinstance(value, Tensor):
            try:
                value = convert_to_tensor(value, dtype=self._dtype)
            except (TypeError, ValueError) as e:
                raise InvalidArgumentError(f"TensorArray.{what}: cannot write {value!r} to a "
                                           f"TensorArray of dtype {self._dtype.name}: {e}") \
                    from None
        if value.dtype != self._dtype:
            raise InvalidArgumentError(f"TensorArray.{what}: the TensorArray's dtype is "
                                       f"{self._dtype.name} but the value written has dtype "
                                       f"{value.dtype.name}")
        if not _compatible(self._element_shape, value.shape):
            raise ValueError(f"TensorArray.{what}: incompatible shape for value "
                             f"({value.shape}), expected {self._element_shape}")
        if self._infer_shape:
            self._element_shape = _merge(self._element_shape, tuple(value.shape))
        self._elements[i] = value
        self._written.add(i)

    def write(self, index, value, name=None):
        """Writes `value` (of the array's dtype and element shape) at `index`; returns the
        array."""
        self._write(index, value, "write")
        return self

    def unstack(self, value, name=None):
        """Writes the rows of `value` (along axis 0) at indices 0, 1, ...; returns the array."""
        value = self._value(value, "unstack")
        n = value.shape[0]
        if n > len(self._elements) and not self._dynamic_size:
            raise ValueError(f"TensorArray.unstack: cannot unstack {n} tensors into a "
                             f"TensorArray of static size {len(self._elements)}")
        return self.scatter(list(range(n)), value, _what="unstack")

    def scatter(self, indices, value, name=None, _what="scatter"):
        """Writes the rows of `value` at `indices` (ints or an int tensor); returns the array."""
        value = self._value(value, _what)
        idx = [_index(i, _what) for i in self._indices(indices, _what)]
        if len(idx) != value.shape[0]:
            raise InvalidArgumentError(f"TensorArray.{_what}: {len(idx)} indices for "
                                       f"{value.shape[0]} rows of a value of shape "
                                       f"{value.shape}")
        for i, row in zip(idx, unstack(value) if idx else []):
            self._write(i, row, _what)
        return self

    def split(self, value, lengths, name=None):
        """Writes the consecutive pieces of `value` of the given `lengths` (along axis 0) at
        indices 0, 1, ...; returns the array."""
        value = self._value(value, "split")
        lengths = [_index(n, "split") for n in self._indices(lengths, "split")]
        if sum(lengths) != value.shape[0]:
            raise InvalidArgumentError(f"TensorArray.split: the lengths {lengths} add up to "
                                       f"{sum(lengths)}, not value.shape[0] = {value.shape[0]}")
        if not self._dynamic_size and len(lengths) != len(self._elements):
            raise InvalidArgumentError(f"TensorArray.split: the TensorArray's size is not equal "
                                       f"to the number of lengths ({len(self._elements)} vs. "
                                       f"{len(lengths)}), and it is not dynamic_size")
        for i, piece in enumerate(split(value, lengths) if lengths else []):
            self._write(i, piece, "split")
        return self

    def _value(self, value, what):
        value = convert_to_tensor(value, dtype=self._dtype) if not isinstance(value, Tensor) \
            else value
        if value.dtype != self._dtype:
            raise InvalidArgumentError(f"TensorArray.{what}: the TensorArray's dtype is "
                                       f"{self._dtype.name} but the value has dtype "
                                       f"{value.dtype.name}")
        if value.ndim == 0:
            raise InvalidArgumentError(f"TensorArray.{what}: expected a value of rank >= 1, "
                                       f"got a scalar")
        return value

    @staticmethod
    def _indices(indices, what):
        if isinstance(indices, (Tensor, Variable)):
            t = convert_to_tensor(indices)
            if t.ndim != 1 or t.dtype.name not in ("int32", "int64"):
                raise InvalidArgumentError(f"TensorArray.{what}: expected an int32 vector, got "
                                           f"{t.dtype.name} of shape {t.shape}")
            return [int(v) for v in t.numpy()]
        return list(indices)

    # -- reading ----------------------------------------------------------------------------------
    def _element(self, i, what):
        i = _index(i, what)
        if i < 0:
            raise OutOfRangeError(f"TensorArray.{what}: reading from negative indices (index "
                                  f"{i}) is not allowed")
        if i >= len(self._elements):
            raise OutOfRangeError(f"TensorArray.{what}: tried to read from index {i} but the "
                                  f"array's size is {len(self._elements)}")
        t = self._elements[i]
        if t is None:
            if i in self._cleared:
                raise InvalidArgumentError(f"TensorArray.{what}: could not read index {i} twice "
                                           f"because it was cleared after a previous read "
                                           f"(set clear_after_read=False to read it again)")
            shape = self._element_shape
            if shape is None or None in shape:
                raise InvalidArgumentError(f"TensorArray.{what}: index {i} was never written "
                                           f"and the element shape {shape} is not fully "
                                           f"defined, so it cannot read as zeros")
            t = zeros(shape, self._dtype)
        return i, t

    def read(self, index, name=None):
        """The element at `index` (zeros of the element shape if it was never written); with
        `clear_after_read`, the element is released and cannot be read again."""
        i, t = self._element(index, "read")
        if self._clear_after_read:
            self._elements[i] = None
            self._cleared.add(i)
        return t

    def stack(self, name=None):
        """The elements stacked along a new axis 0 (shape (size,) + element_shape)."""
        return self.gather(list(range(len(self._elements))), _what="stack")

    def gather(self, indices, name=None, _what="gather"):
        """The elements at `indices` stacked along a new axis 0."""
        ts = [self._element(i, _what)[1] for i in self._indices(indices, _what)]
        if ts:
            return stack(ts)
        shape = self._element_shape
        if shape is None or None in shape:
            raise InvalidArgumentError(f"TensorArray.{_what}: tried to stack no elements with "
                                       f"an element shape {shape} that is not fully defined")
        return zeros((0,) + shape, self._dtype)

    def concat(self, name=None):
        """The elements (each of rank >= 1) concatenated along axis 0."""
        ts = [self._element(i, "concat")[1] for i in range(len(self._elements))]
        for i, t in enumerate(ts):
            if t.ndim == 0:
                raise InvalidArgumentError(f"TensorArray.concat: concat saw a scalar shape at "
                                           f"index {i} but requires at least vectors")
        if not ts:
            shape = self._element_shape
            if shape is None or None in shape[1:] or not shape:
                raise InvalidArgumentError("TensorArray.concat: no elements, and the element "
                                           f"shape {shape} does not give the result's shape")
            return zeros((0,) + shape[1:], self._dtype)
        return concat(ts, axis=0) if len(ts) > 1 else ts[0]

    def close(self, name=None):
        """Releases the elements."""
        self._elements = []

    def __repr__(self):
        return (f"<tg.TensorArray dtype={self._dtype.name} size={len(self._elements)} "
                f"element_shape={self._element_shape}>")


__all__ = public(globals(), ("",))
