"""`tg.TensorShape`: TensorFlow's shape object, the type of `Tensor.shape`.

A TensorShape is a tuple of dimensions (ints, or None where a dimension is unknown), so that
everything written for tuples keeps working (`x.shape == (2, 3)`, `x.shape[-1]`, `np.zeros(
x.shape)`, `x.shape + (1,)`), with TensorFlow's methods on top (`as_list`, `rank`,
`is_fully_defined`, `merge_with`, `concatenate`, ...). As in TensorFlow it also compares equal
to a list of the same dimensions, and slicing gives a TensorShape. A shape of unknown rank,
`TensorShape(None)`, is an instance of the subclass `_UnknownRank`. Unlike TensorFlow's
`TensorShape([])`, an empty (rank-0) shape is falsy, as the empty tuple it is, and its repr is
the tuple's (Tensor's own repr shows `shape=(2, 3)` as TensorFlow's does).
"""


def _dim(d):
    if d is None:
        return None
    if hasattr(d, "value") and not isinstance(d, int):  # a TF-style Dimension
        d = d.value
        if d is None:
            return None
    try:
        n = int(d)
    except (TypeError, ValueError):
        raise TypeError(f"TensorShape: a dimension must be an int or None, got {d!r}") from None
    if n != d or n < 0:
        raise TypeError(f"TensorShape: a dimension must be a non-negative int or None, got {d!r}")
    return n


class TensorShape(tuple):
    """The shape of a tensor: a tuple of ints and None (unknown dimensions), or of unknown rank
    (`TensorShape(None)`), as `tf.TensorShape`.

    >>> s = tg.TensorShape([None, 3])
    >>> s.rank, s.as_list(), s.is_fully_defined(), s == [None, 3]
    (2, [None, 3], False, True)
    >>> s.merge_with([4, None])
    (4, 3)
    """

    __slots__ = ()

    def __new__(cls, dims=()):
        if dims is None:
            return tuple.__new__(_UnknownRank, ())
        if isinstance(dims, int) or hasattr(dims, "value") and not hasattr(dims, "__iter__"):
            dims = (dims,)
        if type(dims) is TensorShape:
            return dims
        if isinstance(dims, _UnknownRank):
            return dims
        return tuple.__new__(TensorShape, (_dim(d) for d in dims))

    # -- TensorFlow's accessors --------------------------------------------------------------
    @property
    def rank(self):
        """The number of dimensions (None for an unknown rank)."""
        return len(self)

    ndims = rank

    @property
    def dims(self):
        """The dimensions as a list (ints and None; None for an unknown rank)."""
        return list(self)

    def as_list(self):
        """The dimensions as a list of ints and None."""
        return list(self)

    def num_elements(self):
        """The number of elements, or None if some dimension is unknown."""
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self:
            n *= d
        return n

    def is_fully_defined(self):
        """Whether the rank and every dimension are known."""
        return None not in tuple(self)

    def __getitem__(self, key):
        out = tuple.__getitem__(self, key)
        return tuple.__new__(TensorShape, out) if isinstance(key, slice) else out

    def __eq__(self, other):
        if isinstance(other, _UnknownRank):
            return False
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = tuple.__hash__

    # + joins shapes into a TensorShape, and with a plain tuple gives a plain tuple (as tuples)
    def __add__(self, other):
        return self.concatenate(other) if isinstance(other, (TensorShape, list)) else \
            tuple.__add__(self, other)

    def __radd__(self, other):
        if isinstance(other, list):
            return as_shape(other).concatenate(self)
        return tuple.__add__(other, self)

    def __reduce__(self):
        return (TensorShape, (list(self),))

    # -- compatibility ----------------------------------------------------------------------
    def is_compatible_with(self, other):
        """Whether `other` could be the same shape (an unknown rank or dimension matches any)."""
        other = as_shape(other)
        if isinstance(other, _UnknownRank):
            return True
        return len(self) == len(other) and all(
            a is None or b is None or a == b for a, b in zip(self, other))

    def assert_is_compatible_with(self, other):
        """Raises ValueError unless `other` is compatible with this shape."""
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def merge_with(self, other):
        """The most specific shape compatible with both (ValueError if they conflict)."""
        other = as_shape(other)
        if isinstance(other, _UnknownRank):
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape([a if a is not None else b for a, b in zip(self, other)])

    def most_specific_compatible_shape(self, other):
        """The most specific shape that both this shape and `other` are compatible with."""
        other = as_shape(other)
        if isinstance(other, _UnknownRank) or len(self) != len(other):
            return TensorShape(None)
        return TensorShape([a if a == b else None for a, b in zip(self, other)])

    def concatenate(self, other):
        """This shape's dimensions followed by `other`'s."""
        other = as_shape(other)
        if isinstance(other, _UnknownRank):
            return other
        return TensorShape(tuple(self) + tuple(other))

    def assert_has_rank(self, rank):
        """Raises ValueError unless the rank is `rank` (or unknown)."""
        if self.rank not in (None, rank):
            raise ValueError(f"Shape {self} must have rank {rank}")

    def with_rank(self, rank):
        """This shape, checked to have rank `rank` (an unknown rank becomes `rank` Nones)."""
        self.assert_has_rank(rank)
        return self

    def with_rank_at_least(self, rank):
        """This shape, checked to have at least `rank` dimensions."""
        if self.rank is not None and self.rank < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def with_rank_at_most(self, rank):
        """This shape, checked to have at most `rank` dimensions."""
        if self.rank is not None and self.rank > rank:
            raise ValueError(f"Shape {self} must have rank at most {rank}")
        return self


class _UnknownRank(TensorShape):
    """A shape whose rank is unknown: TensorShape(None)."""

    __slots__ = ()

    @property
    def rank(self):
        return None

    ndims = rank

    @property
    def dims(self):
        return None

    def as_list(self):
        raise ValueError("as_list() is not defined on an unknown TensorShape.")

    def __len__(self):
        raise ValueError("Cannot take the length of shape with unknown rank.")

    def __iter__(self):
        raise ValueError("Cannot iterate over a shape with unknown rank.")

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self
        return None

    def is_fully_defined(self):
        return False

    def num_elements(self):
        return None

    def __eq__(self, other):
        return isinstance(other, _UnknownRank)

    __hash__ = tuple.__hash__

    def __add__(self, other):
        return self

    def is_compatible_with(self, other):
        return True

    def merge_with(self, other):
        return as_shape(other)

    def most_specific_compatible_shape(self, other):
        return self

    def concatenate(self, other):
        return self

    def with_rank(self, rank):
        return unknown_shape(rank=rank)

    def __repr__(self):
        return "<unknown>"

    def __reduce__(self):
        return (TensorShape, (None,))


def as_shape(shape):
    """`shape` (a TensorShape, a sequence of ints and None, or None) as a TensorShape."""
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank=None):
    """A shape of unknown rank, or of `rank` unknown dimensions."""
    return TensorShape(None if rank is None else [None] * rank)
