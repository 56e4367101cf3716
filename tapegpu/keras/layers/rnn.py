"""Keras 3's recurrent layers: the cells `SimpleRNNCell`, `LSTMCell`, `GRUCell`, the layers
`SimpleRNN`, `LSTM`, `GRU` and `RNN(cell)` that run a cell over the time axis,
`StackedRNNCells` (what `RNN([cell, ...])` runs), and the wrappers
`Bidirectional` and `TimeDistributed`.

Names, arguments, defaults, the weights' shapes and order (`kernel`, `recurrent_kernel`,
`bias`; gates side by side along the last axis: i, f, c, o for LSTM, z, r, h for GRU) and the
formulas are Keras 3's, so weights move between the two with `set_weights`.

The time loop is a Python loop whose steps record on the tape like any other ops. Each step of
a built-in cell does two matmuls, as Keras: the step's inputs by the fused `kernel` and the
state by the fused `recurrent_kernel` (all gates at once), then the gates' elementwise
formulas. (Projecting the whole sequence by one matmul and slicing it per step costs more:
each slice's gradient is a sequence-sized array, O(timesteps^2) in the backward pass.)
On a backend with our CUDA kernels (a GPU, cuda_emu), an LSTM or GRU (reset_after=True) step
with Keras' default activations runs its gates as one op, `tg.nn.lstm_cell` / `gru_cell`: one
kernel forward and one backward per step besides the GEMMs (`_Cell._fuses` says when).

Masks are taken as the `mask=` argument, a bool (batch, timesteps) tensor, with Keras'
meaning, or from the input as `Embedding(mask_zero=True)` or `Masking` made it; with
`return_sequences=True` the output carries the mask on to the next layer. `stateful=True` is
not supported (a clear error); `unroll` is accepted and changes nothing (the loop is always a
Python loop).
"""
import inspect

import numpy as np

from ... import ops
from ...core import nest
from ...core.tensor import Tensor, Variable, _thread, convert_to_tensor
from ...models import initializers, regularizers
from ...ops.nn import dropout_drawn
from ...ops.random import seeded_uniform
from .activations import get_activation
from .base import Layer, _takes_mask, _takes_training


_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _apply(activation, x):
    return x if activation is None else activation(x)


def _positive_units(owner, units):
    if isinstance(units, bool) or int(units) != units or int(units) <= 0:
        raise ValueError(f"{owner}: units must be a positive integer, got {units!r}")
    return int(units)


def _rate(owner, label, rate):
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"{owner}: {label} must be in [0, 1), got {rate}")
    return rate


def _no_constraints(owner, **given):
    for label, value in given.items():
        if value is not None:
            raise NotImplementedError(f"{owner}: {label} is not supported (got {value!r}); "
                                      "only None")


class _Cell(Layer):
    """What the three built-in cells share: weights, dropout masks, and the split of a step
    into an input projection (`_project`, done for every step at once by `RNN`) and the
    recurrence (`_step`).

    A cell called by itself, `cell(inputs, states, training=False)`, takes one step:
    `inputs` is (batch, features), `states` a list of (batch, units) tensors; it returns
    `(output, new_states)`, as Keras' cells.
    """

    _GATES = 1

    def __init__(self, units, activation, use_bias, kernel_initializer, recurrent_initializer,
                 bias_initializer, kernel_regularizer, recurrent_regularizer, bias_regularizer,
                 kernel_constraint, recurrent_constraint, bias_constraint, dropout,
                 recurrent_dropout, seed, dtype, name, **kwargs):
        kwargs.pop("implementation", None)  # Keras' choice of kernel split: one path here
        super().__init__(dtype=dtype, name=name, **kwargs)
        owner = type(self).__name__
        _no_constraints(owner, kernel_constraint=kernel_constraint,
                        recurrent_constraint=recurrent_constraint,
                        bias_constraint=bias_constraint)
        self.units = _positive_units(owner, units)
        self.activation = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = regularizers.get(recurrent_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.dropout = _rate(owner, "dropout", dropout)
        self.recurrent_dropout = _rate(owner, "recurrent_dropout", recurrent_dropout)
        self.seed = seed
        self._generator = seeded_uniform(seed)
        self.kernel = self.recurrent_kernel = self.bias = None

    @property
    def state_size(self):
        return self.units

    @property
    def output_size(self):
        return self.units

    def build(self, input_shape):
        width = self._GATES * self.units
        self.kernel = self.add_weight("kernel", (input_shape[-1], width),
                                      self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        self.recurrent_kernel = self.add_weight("recurrent_kernel", (self.units, width),
                                                self.recurrent_initializer,
                                                regularizer=self.recurrent_regularizer)
        if self.use_bias:
            self.bias = self.add_weight("bias", self._bias_shape(), self._bias_init(),
                                        regularizer=self.bias_regularizer)

    def _bias_shape(self):
        return (self._GATES * self.units,)

    def _bias_init(self):
        return self.bias_initializer

    def get_initial_state(self, batch_size=None):
        """Zero states, one (batch_size, size) tensor per entry of `state_size`."""
        sizes = self.state_size if isinstance(self.state_size, (list, tuple)) \
            else [self.state_size]
        dtype = self._dtype if self._dtype is not None else np.dtype(np.float32)
        return [ops.zeros((batch_size, n), dtype=dtype) for n in sizes]

    # -- dropout: one mask per sequence, the same at every step (Keras' rule) -----------------
    def _mask(self, shape, rate):
        ones = ops.ones(shape, dtype=self._dtype)
        if self._generator is None:
            return ops.dropout(ones, rate)
        return dropout_drawn(ones, rate, None, self._generator)

    def _masks(self, batch, training):
        """The input and recurrent dropout masks (None when off) for one sequence of `batch`
        examples: 0 or 1 / (1 - rate), the same at every step."""
        dp = self._mask((batch, self.kernel.shape[0]), self.dropout) \
            if training and self.dropout > 0 else None
        rec = self._mask((batch, self.units), self.recurrent_dropout) \
            if training and self.recurrent_dropout > 0 else None
        return dp, rec

    # -- one step ------------------------------------------------------------------------------
    def _project(self, inputs):
        """inputs @ kernel (+ the input bias): every gate's input part at once."""
        xw = ops.matmul(inputs, self.kernel)
        bias = self._input_bias()
        return xw if bias is None else xw + bias

    def _input_bias(self):
        return self.bias.value() if self.use_bias else None

    def _step(self, xw, states, rec_mask):
        raise NotImplementedError

    def _run(self, x, states, rec_mask):
        """One step from the (dropped-out) inputs `x`: by the fused cell op where it applies
        (`_fuses`), else by the composite formulas of `_step`."""
        if self._fuses(x):
            return self._fused_step(x, states, rec_mask)
        return self._step(self._project(x), states, rec_mask)

    _FUSED = None  # the name of the op of the cell's pointwise part, if it has one

    def _fuses(self, x):
        """Whether a step on `x` runs the fused cell op: on a backend with our CUDA kernels
        (a GPU, cuda_emu), float32 or float64, Keras' default activations (sigmoid gates,
        tanh), outside a tg.function trace. On the CPU the composite ops run (the op would
        give the same bits, slower). In a trace too: there the backward is the op's rule on
        tensors, which recomputes the gates, and the fused replay of the composite step takes
        fewer launches (LSTM(256) over 32 steps: 493 against 523)."""
        return self._FUSED is not None and not _thread.tracers and \
            x._dev.kernels is not None and \
            x._data.dtype in _FUSED_DTYPES and self.activation is ops.tanh and \
            self.recurrent_activation is ops.sigmoid

    def _fused_bias(self, like):
        if self.use_bias:
            return self.bias.value()
        return ops.zeros(self._bias_shape(), dtype=like.dtype)

    def call(self, inputs, states, training=False):
        states = _state_list(states)
        owner = f"{type(self).__name__} {self.name!r}"
        if inputs.ndim != 2 or inputs.shape[-1] != self.kernel.shape[0]:
            raise ValueError(f"{owner}: expected inputs of shape (batch, "
                             f"{self.kernel.shape[0]}), got {inputs.shape}")
        sizes = nest.flatten(self.state_size)
        if [tuple(s.shape) for s in states] != [(inputs.shape[0], n) for n in sizes]:
            raise ValueError(f"{owner}: expected {len(sizes)} state(s) of shapes "
                             f"{[(inputs.shape[0], n) for n in sizes]}, got "
                             f"{[tuple(s.shape) for s in states]}")
        dp, rec = self._masks(inputs.shape[0], training)
        x = inputs if dp is None else inputs * dp
        return self._run(x, states, rec)


def _check_mask(owner, mask, inputs):
    mask = mask if isinstance(mask, Tensor) else convert_to_tensor(mask)
    if mask.shape != inputs.shape[:2] or mask._data.dtype.kind != "b":
        raise ValueError(f"{owner}: mask must be a bool tensor of shape (batch, timesteps) = "
                         f"{inputs.shape[:2]}, got {mask.dtype.name}{list(mask.shape)}")
    return mask


def _state_list(states):
    if isinstance(states, (list, tuple)):
        return [s if isinstance(s, Tensor) else convert_to_tensor(s) for s in states]
    return [states if isinstance(states, Tensor) else convert_to_tensor(states)]


class SimpleRNNCell(_Cell):
    """One step of a fully connected RNN (Keras' SimpleRNNCell):
    `h = activation(x @ kernel + bias + h_prev @ recurrent_kernel)`; the output is `h`.

    >>> cell = tg.keras.layers.SimpleRNNCell(4)
    >>> out, states = cell(tg.ones((2, 3)), [tg.zeros((2, 4))])
    >>> out.shape, len(states)
    ((2, 4), 1)
    """

    def __init__(self, units, activation="tanh", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, kernel_constraint=None, recurrent_constraint=None,
                 bias_constraint=None, dropout=0.0, recurrent_dropout=0.0, seed=None,
                 dtype=None, name=None, **kwargs):
        super().__init__(units, activation, use_bias, kernel_initializer,
                         recurrent_initializer, bias_initializer, kernel_regularizer,
                         recurrent_regularizer, bias_regularizer, kernel_constraint,
                         recurrent_constraint, bias_constraint, dropout, recurrent_dropout,
                         seed, dtype, name, **kwargs)

    def _step(self, xw, states, rec_mask):
        h_prev = states[0] if rec_mask is None else states[0] * rec_mask
        h = _apply(self.activation, xw + ops.matmul(h_prev, self.recurrent_kernel))
        return h, [h]


class LSTMCell(_Cell):
    """One step of a long short-term memory (Keras' LSTMCell). With
    `z = x @ kernel + h_prev @ recurrent_kernel + bias` split into four (i, f, c, o):

        i = recurrent_activation(z_i)    f = recurrent_activation(z_f)
        c = f * c_prev + i * activation(z_c)
        o = recurrent_activation(z_o)    h = o * activation(c)

    The output is `h`, the states `[h, c]`. `unit_forget_bias=True` initialises the forget
    gate's bias to ones. Recurrent dropout multiplies `h_prev` by one mask for all four gates
    (Keras draws one per gate; the distribution of each gate's input is the same).

    >>> cell = tg.keras.layers.LSTMCell(4)
    >>> out, (h, c) = cell(tg.ones((2, 3)), [tg.zeros((2, 4)), tg.zeros((2, 4))])
    >>> cell.kernel.shape, cell.recurrent_kernel.shape, cell.bias.numpy()[4:8]
    ((3, 16), (4, 16), array([1., 1., 1., 1.], dtype=float32))
    """

    _GATES = 4
    _FUSED = "lstm_cell"

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", unit_forget_bias=True, kernel_regularizer=None,
                 recurrent_regularizer=None, bias_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout=0.0,
                 recurrent_dropout=0.0, seed=None, dtype=None, name=None, **kwargs):
        super().__init__(units, activation, use_bias, kernel_initializer,
                         recurrent_initializer, bias_initializer, kernel_regularizer,
                         recurrent_regularizer, bias_regularizer, kernel_constraint,
                         recurrent_constraint, bias_constraint, dropout, recurrent_dropout,
                         seed, dtype, name, **kwargs)
        self.recurrent_activation = get_activation(recurrent_activation)
        self.unit_forget_bias = bool(unit_forget_bias)

    @property
    def state_size(self):
        return [self.units, self.units]

    def _bias_init(self):
        if not self.unit_forget_bias:
            return self.bias_initializer
        units, init = self.units, self.bias_initializer

        def forget_ones(shape, dtype=None):  # [init(u), ones(u), init(2u)], as Keras
            parts = [initializers.make(init, (units,), dtype),
                     ops.ones((units,), dtype=dtype),
                     initializers.make(init, (2 * units,), dtype)]
            return ops.concat(parts, axis=0)
        return forget_ones

    def _step(self, xw, states, rec_mask):
        h_prev, c_prev = states[0], states[1]
        if rec_mask is not None:
            h_prev = h_prev * rec_mask
        z = xw + ops.matmul(h_prev, self.recurrent_kernel)  # all four gates in one matmul
        z_i, z_f, z_c, z_o = ops.split(z, 4, axis=-1)
        gate = self.recurrent_activation
        c = _apply(gate, z_f) * c_prev + _apply(gate, z_i) * _apply(self.activation, z_c)
        h = _apply(gate, z_o) * _apply(self.activation, c)
        return h, [h, c]

    def _fused_step(self, x, states, rec_mask):
        h_prev = states[0] if rec_mask is None else states[0] * rec_mask
        h, c = ops.lstm_cell(ops.matmul(x, self.kernel),
                             ops.matmul(h_prev, self.recurrent_kernel), self._fused_bias(x),
                             states[1])
        return h, [h, c]


class GRUCell(_Cell):
    """One step of a gated recurrent unit (Keras' GRUCell). With `x @ kernel + input_bias`
    split into (x_z, x_r, x_h):

    reset_after=True (default, Keras 3 and cuDNN's convention; bias of shape (2, 3 * units):
    input bias, recurrent bias), with `h_prev @ recurrent_kernel + recurrent_bias` split into
    (r_z, r_r, r_h):

        z = recurrent_activation(x_z + r_z)    r = recurrent_activation(x_r + r_r)
        hh = activation(x_h + r * r_h)

    reset_after=False (bias of shape (3 * units,)): z and r as above without a recurrent bias,
    `hh = activation(x_h + (r * h_prev) @ recurrent_kernel[:, 2 * units:])`.

    Then `h = z * h_prev + (1 - z) * hh`; output and state are `h`. Recurrent dropout
    multiplies `h_prev` where it enters the matmuls (not in the last mix, as Keras), by one
    mask for the three gates (Keras draws one per gate when `recurrent_dropout > 0`).

    >>> cell = tg.keras.layers.GRUCell(4)
    >>> out, (h,) = cell(tg.ones((2, 3)), [tg.zeros((2, 4))])
    >>> cell.kernel.shape, cell.recurrent_kernel.shape, cell.bias.shape
    ((3, 12), (4, 12), (2, 12))
    """

    _GATES = 3
    _FUSED = "gru_cell"

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, kernel_constraint=None, recurrent_constraint=None,
                 bias_constraint=None, dropout=0.0, recurrent_dropout=0.0, reset_after=True,
                 seed=None, dtype=None, name=None, **kwargs):
        super().__init__(units, activation, use_bias, kernel_initializer,
                         recurrent_initializer, bias_initializer, kernel_regularizer,
                         recurrent_regularizer, bias_regularizer, kernel_constraint,
                         recurrent_constraint, bias_constraint, dropout, recurrent_dropout,
                         seed, dtype, name, **kwargs)
        self.recurrent_activation = get_activation(recurrent_activation)
        self.reset_after = bool(reset_after)

    def _bias_shape(self):
        return (2, 3 * self.units) if self.reset_after else (3 * self.units,)

    def _input_bias(self):
        if not self.use_bias:
            return None
        return self.bias.value()[0] if self.reset_after else self.bias.value()

    def _step(self, xw, states, rec_mask):
        h_prev = states[0]
        h_in = h_prev if rec_mask is None else h_prev * rec_mask
        u = self.units
        x_z, x_r, x_h = ops.split(xw, 3, axis=-1)
        gate = self.recurrent_activation
        if self.reset_after:
            inner = ops.matmul(h_in, self.recurrent_kernel)  # all three gates in one matmul
            if self.use_bias:
                inner = inner + self.bias.value()[1]
            r_z, r_r, r_h = ops.split(inner, 3, axis=-1)
            z, r = _apply(gate, x_z + r_z), _apply(gate, x_r + r_r)
            hh = _apply(self.activation, x_h + r * r_h)
        else:
            kernel = self.recurrent_kernel.value()
            inner = ops.matmul(h_in, kernel[:, :2 * u])
            r_z, r_r = ops.split(inner, 2, axis=-1)
            z, r = _apply(gate, x_z + r_z), _apply(gate, x_r + r_r)
            hh = _apply(self.activation, x_h + ops.matmul(r * h_in, kernel[:, 2 * u:]))
        h = z * h_prev + (1.0 - z) * hh
        return h, [h]

    def _fuses(self, x):
        return self.reset_after and super()._fuses(x)

    def _fused_step(self, x, states, rec_mask):
        h_in = states[0] if rec_mask is None else states[0] * rec_mask
        h = ops.gru_cell(ops.matmul(x, self.kernel), ops.matmul(h_in, self.recurrent_kernel),
                         self._fused_bias(x), states[0])
        return h, [h]


class StackedRNNCells(Layer):
    """Cells run one after the other at each step, each fed the previous one's output (Keras'
    StackedRNNCells; `RNN([cell, ...])` makes one). Its states are nested per cell, as Keras':
    `state_size` is `[cell.state_size, ...]` and `RNN(..., return_state=True)` returns
    `(output, states_of_cell_1, states_of_cell_2, ...)`.

    >>> rnn = tg.keras.layers.RNN([tg.keras.layers.LSTMCell(4), tg.keras.layers.GRUCell(3)],
    ...                           return_state=True)
    >>> out, (h1, c1), (h2,) = rnn(tg.ones((2, 5, 6)))
    >>> out.shape, c1.shape, h2.shape
    ((2, 3), (2, 4), (2, 3))
    """

    def __init__(self, cells, dtype=None, name=None, **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        cells = list(cells)
        for cell in cells:
            if not callable(cell) or not hasattr(cell, "state_size"):
                raise ValueError(f"StackedRNNCells: each cell must be a layer with "
                                 f"call(inputs, states) and a state_size, got {cell!r}")
        if not cells:
            raise ValueError("StackedRNNCells: needs at least one cell")
        self.cells = cells

    @property
    def state_size(self):
        return [cell.state_size for cell in self.cells]

    @property
    def output_size(self):
        last = self.cells[-1]
        size = getattr(last, "output_size", None)
        if size is not None:
            return size
        return last.state_size[0] if isinstance(last.state_size, (list, tuple)) \
            else last.state_size

    def build(self, input_shape):
        batch, width = input_shape[0], input_shape[-1]
        for cell in self.cells:
            if isinstance(cell, Layer) and not cell.built:
                if cell._dtype is None:
                    cell._dtype = self._dtype
                cell.build((batch, width))
                cell.built = True
            width = getattr(cell, "output_size", None) or nest.flatten(cell.state_size)[0]

    def get_initial_state(self, batch_size=None):
        """Zero states, one list per cell."""
        out = []
        for cell in self.cells:
            if hasattr(cell, "get_initial_state"):
                out.append(list(cell.get_initial_state(batch_size)))
            else:
                sizes = cell.state_size if isinstance(cell.state_size, (list, tuple)) \
                    else [cell.state_size]
                out.append([ops.zeros((batch_size, n), dtype=self._dtype) for n in sizes])
        return out

    def call(self, inputs, states, training=False):
        if len(states) != len(self.cells):
            raise ValueError(f"StackedRNNCells {self.name!r}: expected one list of states per "
                             f"cell ({len(self.cells)}), got {len(states)}")
        new_states = []
        for cell, cell_states in zip(self.cells, states):
            kwargs = {"training": training} if _takes_training(cell) else {}
            inputs, new = cell(inputs, _state_list(cell_states), **kwargs)
            new_states.append(list(new) if isinstance(new, (list, tuple)) else [new])
        return inputs, new_states


class RNN(Layer):
    """Runs a cell over the time axis of (batch, timesteps, features) inputs (Keras' RNN).

    `cell` is a built-in cell, a list of cells (run as `StackedRNNCells`, states nested per
    cell) or any layer with `call(inputs, states)` returning
    `(output, new_states)` and a `state_size` (an int or a list of ints); a cell whose
    `call` takes `training` gets it. Returns the last output (batch, units), or every output
    (batch, timesteps, units) with `return_sequences=True`; with `return_state=True` a tuple
    `(output, *final_states)`. `go_backwards=True` reads the sequence from its end and returns
    the outputs in that (reversed) order, as Keras. `initial_state` is a list of tensors (zeros
    when None).

    `mask` (bool, (batch, timesteps)) skips the steps where it is False: the states are
    carried over and the output repeats the previous one, or is zeros with
    `zero_output_for_mask=True` (Keras' rule). Layers do not pass masks on to the next layer.
    `stateful=True` is not supported; `unroll` is accepted and changes nothing.

    >>> rnn = tg.keras.layers.RNN(tg.keras.layers.GRUCell(4), return_sequences=True)
    >>> rnn(tg.ones((2, 5, 3))).shape
    (2, 5, 4)
    """

    def __init__(self, cell, return_sequences=False, return_state=False, go_backwards=False,
                 stateful=False, unroll=False, zero_output_for_mask=False, dtype=None,
                 name=None, **kwargs):
        owner = type(self).__name__
        _no_constraints(owner, activity_regularizer=kwargs.pop("activity_regularizer", None))
        super().__init__(dtype=dtype, name=name, **kwargs)
        if isinstance(cell, (list, tuple)):
            cell = StackedRNNCells(cell)
        if not callable(cell) or not hasattr(cell, "state_size"):
            raise ValueError(f"{owner}: cell must be a layer with call(inputs, states) and a "
                             f"state_size attribute, got {cell!r}")
        if stateful:
            raise NotImplementedError(f"{owner}: stateful=True is not supported; pass the last "
                                      "states back as initial_state (return_state=True)")
        self.cell = cell
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.go_backwards = bool(go_backwards)
        self.stateful = False
        self.unroll = bool(unroll)
        self.zero_output_for_mask = bool(zero_output_for_mask)

    @property
    def units(self):
        return getattr(self.cell, "units", None)

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"{type(self).__name__} {self.name!r}: inputs must have shape "
                             f"(batch, timesteps, features), got {tuple(input_shape)}")
        cell = self.cell
        if isinstance(cell, Layer) and not cell.built:
            if cell._dtype is None:
                cell._dtype = self._dtype
            cell.build((input_shape[0], input_shape[-1]))
            cell.built = True

    def get_initial_state(self, batch_size):
        """Zero states for `batch_size` sequences, one tensor per entry of the cell's
        `state_size`. tf.keras 2's spelling, the inputs (batch, timesteps, features) in place
        of `batch_size`, works too.

        >>> [s.shape for s in tg.keras.layers.LSTM(4).get_initial_state(2)]
        [(2, 4), (2, 4)]
        """
        if not isinstance(batch_size, (int, np.integer)):
            shape = getattr(batch_size, "shape", None)
            if shape is None or len(shape) != 3:
                raise ValueError(f"{type(self).__name__}.get_initial_state: expected a batch "
                                 f"size or inputs of shape (batch, timesteps, features), got "
                                 f"{batch_size!r}")
            batch_size = int(shape[0])
        if hasattr(self.cell, "get_initial_state"):
            states = self.cell.get_initial_state(batch_size)
            return [states] if isinstance(states, Tensor) else list(states)
        sizes = self._state_sizes()
        return [ops.zeros((batch_size, n), dtype=self._dtype) for n in sizes]

    def _state_sizes(self):
        size = self.cell.state_size
        return list(size) if isinstance(size, (list, tuple)) else [size]

    supports_masking = True

    def compute_mask(self, inputs, mask=None):
        """The input's mask with `return_sequences=True` (one per output step), else None."""
        return mask if self.return_sequences else None

    def call(self, inputs, initial_state=None, mask=None, training=False):
        owner = f"{type(self).__name__} {self.name!r}"
        if inputs.ndim != 3 or inputs.shape[1] == 0:
            raise ValueError(f"{owner}: inputs must have shape (batch, timesteps, features) "
                             f"with at least one timestep, got {inputs.shape}")
        states = self._initial_states(owner, initial_state, inputs)
        masks = None if mask is None else ops.unstack(_check_mask(owner, mask, inputs), axis=1)
        outputs, states = self._loop(inputs, states, training, masks)
        if self.return_sequences:
            output = ops.stack(outputs, axis=1)
        else:
            output = outputs[-1]
        return (output, *states) if self.return_state else output

    def _initial_states(self, owner, initial_state, inputs):
        batch = inputs.shape[0]
        if initial_state is None:
            return self.get_initial_state(batch)
        template = self.get_initial_state(batch)
        given = _state_list(nest.flatten(initial_state))
        sizes = [int(s.shape[-1]) for s in nest.flatten(template)]
        shapes = [tuple(s.shape) for s in given]
        if shapes != [(batch, n) for n in sizes]:
            raise ValueError(f"{owner}: initial_state must be {len(sizes)} tensor(s) of shapes "
                             f"{[(batch, n) for n in sizes]}, got shapes {shapes}")
        dtypes = [s._data.dtype for s in given]
        if any(d != inputs._data.dtype for d in dtypes):
            raise TypeError(f"{owner}: initial_state must have the inputs' dtype "
                            f"{inputs.dtype.name}, got {[d.name for d in dtypes]}; cast it "
                            "with tg.cast")
        given = [s._read() if isinstance(s, Variable) else s for s in given]
        return nest.pack_sequence_as(template, given)

    def _loop(self, inputs, states, training, masks):
        """The outputs of every step (in the order processed) and the last states. At a step
        whose mask is False the states are carried over and the output is the previous one
        (zeros with `zero_output_for_mask`), as Keras."""
        cell = self.cell
        if isinstance(cell, _Cell):
            dp, rec = cell._masks(inputs.shape[0], training)
            x = inputs if dp is None else inputs * ops.expand_dims(dp, 1)
            steps = ops.unstack(x, axis=1)

            def step(x_t, states):
                return cell._run(x_t, states, rec)
        else:
            steps = ops.unstack(inputs, axis=1)
            kwargs = {"training": training} if _takes_training(cell) else {}

            def step(x_t, states):
                out, new = cell(x_t, states, **kwargs)
                return out, list(new) if isinstance(new, (list, tuple)) else [new]
        if self.go_backwards:
            steps = steps[::-1]
            masks = None if masks is None else masks[::-1]
        outputs = []
        for t, x_t in enumerate(steps):
            out, new = step(x_t, states)
            if masks is not None:
                keep = ops.expand_dims(masks[t], -1)
                new = nest.pack_sequence_as(new, [ops.where(keep, n, s) for n, s in zip(
                    nest.flatten(new), nest.flatten(states))])
                held = ops.zeros_like(out) if self.zero_output_for_mask or not outputs \
                    else outputs[-1]
                out = ops.where(keep, out, held)
            states = new
            outputs.append(out)
        return outputs, states


class SimpleRNN(RNN):
    """A fully connected RNN over (batch, timesteps, features) inputs: `RNN(SimpleRNNCell)`
    with Keras' arguments (see `SimpleRNNCell` for the formula, `RNN` for the outputs).

    >>> layer = tg.keras.layers.SimpleRNN(4, return_state=True)
    >>> out, h = layer(tg.ones((2, 5, 3)))
    >>> out.shape, h.shape
    ((2, 4), (2, 4))
    """

    def __init__(self, units, activation="tanh", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout=0.0,
                 recurrent_dropout=0.0, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, unroll=False, seed=None, dtype=None,
                 name=None, trainable=True, **kwargs):
        cell = SimpleRNNCell(
            units, activation=activation, use_bias=use_bias,
            kernel_initializer=kernel_initializer, recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer, bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint, recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint, dropout=dropout,
            recurrent_dropout=recurrent_dropout, seed=seed, dtype=dtype, trainable=trainable)
        super().__init__(cell, return_sequences=return_sequences, return_state=return_state,
                         go_backwards=go_backwards, stateful=stateful, unroll=unroll,
                         activity_regularizer=activity_regularizer, dtype=dtype, name=name,
                         trainable=trainable, **kwargs)


class LSTM(RNN):
    """A long short-term memory layer over (batch, timesteps, features) inputs:
    `RNN(LSTMCell)` with Keras' arguments (see `LSTMCell` for the formulas, `RNN` for the
    outputs); with `return_state=True` it returns `(output, h, c)`.

    >>> layer = tg.keras.layers.LSTM(4, return_sequences=True, return_state=True)
    >>> seq, h, c = layer(tg.ones((2, 5, 3)))
    >>> seq.shape, h.shape, c.shape
    ((2, 5, 4), (2, 4), (2, 4))
    """

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", unit_forget_bias=True, kernel_regularizer=None,
                 recurrent_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, recurrent_constraint=None, bias_constraint=None,
                 dropout=0.0, recurrent_dropout=0.0, seed=None, return_sequences=False,
                 return_state=False, go_backwards=False, stateful=False, unroll=False,
                 use_cudnn="auto", dtype=None, name=None, trainable=True, **kwargs):
        _check_use_cudnn(type(self).__name__, use_cudnn)
        cell = LSTMCell(
            units, activation=activation, recurrent_activation=recurrent_activation,
            use_bias=use_bias, kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer, bias_initializer=bias_initializer,
            unit_forget_bias=unit_forget_bias, kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer, bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint, recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint, dropout=dropout,
            recurrent_dropout=recurrent_dropout, seed=seed, dtype=dtype, trainable=trainable,
            implementation=kwargs.pop("implementation", 2))
        super().__init__(cell, return_sequences=return_sequences, return_state=return_state,
                         go_backwards=go_backwards, stateful=stateful, unroll=unroll,
                         activity_regularizer=activity_regularizer, dtype=dtype, name=name,
                         trainable=trainable, **kwargs)


class GRU(RNN):
    """A gated recurrent unit layer over (batch, timesteps, features) inputs: `RNN(GRUCell)`
    with Keras' arguments, `reset_after=True` by default (see `GRUCell` for the formulas,
    `RNN` for the outputs).

    >>> layer = tg.keras.layers.GRU(4, return_state=True)
    >>> out, h = layer(tg.ones((2, 5, 3)))
    >>> bool(tg.reduce_all(out == h))
    True
    """

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout=0.0,
                 recurrent_dropout=0.0, seed=None, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, unroll=False, reset_after=True,
                 use_cudnn="auto", dtype=None, name=None, trainable=True, **kwargs):
        _check_use_cudnn(type(self).__name__, use_cudnn)
        cell = GRUCell(
            units, activation=activation, recurrent_activation=recurrent_activation,
            use_bias=use_bias, kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer, bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer, recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer, kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint, bias_constraint=bias_constraint,
            dropout=dropout, recurrent_dropout=recurrent_dropout, reset_after=reset_after,
            seed=seed, dtype=dtype, trainable=trainable,
            implementation=kwargs.pop("implementation", 2))
        super().__init__(cell, return_sequences=return_sequences, return_state=return_state,
                         go_backwards=go_backwards, stateful=stateful, unroll=unroll,
                         activity_regularizer=activity_regularizer, dtype=dtype, name=name,
                         trainable=trainable, **kwargs)


def _check_use_cudnn(owner, use_cudnn):
    if use_cudnn not in ("auto", True, False):
        raise ValueError(f"{owner}: use_cudnn must be 'auto', True or False, got "
                         f"{use_cudnn!r}")


_MERGE_MODES = ("concat", "sum", "mul", "ave", None)


class Bidirectional(Layer):
    """Runs a recurrent layer forwards and a copy of it backwards over the sequence and merges
    the two outputs (Keras' Bidirectional).

    The backward layer is a fresh copy of `layer` with `go_backwards` flipped (or
    `backward_layer`); with `return_sequences=True` its outputs are put back in time order
    before merging. `merge_mode` is 'concat' (default), 'sum', 'mul', 'ave' or None (a list of
    the two outputs). With `return_state=True` the result is the tuple `(output,
    *forward_states, *backward_states)` (two outputs first when merge_mode is None). With a
    `mask` and `return_sequences`, masked steps output zeros in both directions (as Keras).

    >>> bi = tg.keras.layers.Bidirectional(tg.keras.layers.LSTM(4, return_sequences=True))
    >>> bi(tg.ones((2, 5, 3))).shape
    (2, 5, 8)
    """

    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None,
                 dtype=None, name=None, **kwargs):
        if not isinstance(layer, RNN):
            raise ValueError(f"Bidirectional: layer must be a recurrent layer (RNN, LSTM, GRU, "
                             f"SimpleRNN), got {layer!r}")
        if merge_mode not in _MERGE_MODES:
            raise ValueError(f"Bidirectional: merge_mode must be one of {_MERGE_MODES}, got "
                             f"{merge_mode!r}")
        if weights is not None:
            raise NotImplementedError("Bidirectional: weights= is not supported; call "
                                      "set_weights after the first call")
        super().__init__(dtype=dtype, name=name, **kwargs)
        self.forward_layer = _copy_layer(layer, name=f"forward_{layer.name}")
        if backward_layer is None:
            backward_layer = _copy_layer(layer, name=f"backward_{layer.name}",
                                         go_backwards=not layer.go_backwards)
        elif not isinstance(backward_layer, RNN) or \
                backward_layer.go_backwards == layer.go_backwards or \
                (backward_layer.return_sequences, backward_layer.return_state) != \
                (layer.return_sequences, layer.return_state):
            raise ValueError("Bidirectional: backward_layer must be a recurrent layer with "
                             "go_backwards opposite to layer's and the same return_sequences "
                             "and return_state")
        self.backward_layer = backward_layer
        for sub in (self.forward_layer, self.backward_layer):  # masked steps output zeros
            sub.zero_output_for_mask = sub.return_sequences       # (Keras forces it too)
        self.merge_mode = merge_mode
        self.return_sequences = layer.return_sequences
        self.return_state = layer.return_state

    def build(self, input_shape):
        for sub in (self.forward_layer, self.backward_layer):
            if sub._dtype is None:
                sub._dtype = self._dtype

    supports_masking = True

    def compute_mask(self, inputs, mask=None):
        """The input's mask with `return_sequences=True`, else None."""
        return mask if self.return_sequences else None

    def call(self, inputs, initial_state=None, mask=None, training=False):
        fw_init = bw_init = None
        if initial_state is not None:
            initial_state = list(initial_state)
            half = len(initial_state) // 2
            fw_init, bw_init = initial_state[:half], initial_state[half:]
        fw = self.forward_layer(inputs, initial_state=fw_init, mask=mask, training=training)
        bw = self.backward_layer(inputs, initial_state=bw_init, mask=mask, training=training)
        fw_states = bw_states = []
        if self.return_state:
            fw, fw_states = fw[0], fw[1:]
            bw, bw_states = bw[0], bw[1:]
        if self.return_sequences:  # the backward outputs, back in time order
            bw = bw[:, ::-1]
        if self.merge_mode is None:
            output = [fw, bw]
        elif self.merge_mode == "concat":
            output = ops.concat([fw, bw], axis=-1)
        elif self.merge_mode == "sum":
            output = fw + bw
        elif self.merge_mode == "mul":
            output = fw * bw
        else:
            output = (fw + bw) * 0.5
        if not self.return_state:
            return output
        head = tuple(output) if self.merge_mode is None else (output,)
        return head + tuple(fw_states) + tuple(bw_states)


def _copy_layer(layer, **overrides):
    """A new, unbuilt layer made from `layer`'s constructor arguments with `overrides` (layers
    among them, such as cells, are copied the same way, so the copies share no weights)."""
    args, kw = layer.__dict__.get("_init_args", ((), {}))
    params = [p for p in inspect.signature(type(layer).__init__).parameters][1:]
    given = {**dict(zip(params, args)), **kw, **overrides}
    for key, value in given.items():
        if isinstance(value, Layer):
            given[key] = _copy_layer(value, name=None)
        elif isinstance(value, (list, tuple)) and any(isinstance(v, Layer) for v in value):
            given[key] = [_copy_layer(v, name=None) if isinstance(v, Layer) else v
                          for v in value]
    return type(layer)(**given)


class TimeDistributed(Layer):
    """Applies `layer` to every timestep of `(batch, time, ...)` inputs: the steps are folded
    into the batch, `layer` runs once on `(batch * time, ...)`, and the result is unfolded, so
    one set of weights serves every step.

    The weights are `layer`'s (Keras' order and shapes). The input's mask passes on. (Keras
    calls `layer` once per step; the results are the same, except for layers whose training
    behaviour depends on the batch, e.g. `BatchNormalization(training=True)`, which here takes
    its statistics over every step at once.)

    >>> td = tg.keras.layers.TimeDistributed(tg.keras.layers.Dense(3))
    >>> td(tg.ones((2, 5, 4))).shape
    (2, 5, 3)
    >>> [v.shape for v in td.weights]
    [(4, 3), (3,)]
    """

    supports_masking = True

    def __init__(self, layer, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not isinstance(layer, Layer):
            raise ValueError(f"TimeDistributed: please initialize the wrapper with a "
                             f"`keras.layers.Layer` instance, got {layer!r}")
        self.layer = layer

    def build(self, input_shape):
        if len(input_shape) < 3:
            raise ValueError(f"TimeDistributed {self.name!r}: inputs must have rank >= 3 "
                             f"(batch, time, ...), got shape {tuple(input_shape)}")

    def call(self, inputs, training=False, mask=None):
        if inputs.ndim < 3:
            raise ValueError(f"TimeDistributed {self.name!r}: inputs must have rank >= 3 "
                             f"(batch, time, ...), got shape {inputs.shape}")
        batch, steps = inputs.shape[:2]
        folded = ops.reshape(inputs, (batch * steps,) + inputs.shape[2:])
        kwargs = {}
        if _takes_training(self.layer):
            kwargs["training"] = training
        if mask is not None and _takes_mask(self.layer):
            m = mask if isinstance(mask, Tensor) else convert_to_tensor(mask)
            if tuple(m.shape[:2]) != (batch, steps):
                raise ValueError(f"TimeDistributed {self.name!r}: the mask's first two "
                                 f"dimensions (batch, time) must match the inputs', got mask "
                                 f"shape {m.shape} for inputs of shape {inputs.shape}")
            if m.ndim > 2:
                kwargs["mask"] = ops.reshape(m, (batch * steps,) + m.shape[2:])
        out = self.layer(folded, **kwargs)
        return ops.reshape(out, (batch, steps) + out.shape[1:])
