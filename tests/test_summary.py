"""tg.summary: file writers, the default writer and step, scalars written as TensorBoard events
(decoded with tapegpu.testing.event_files), and scalars inside tg.function written at every
call."""
import glob
import os

import numpy as np
import pytest

import tapegpu as tg
from tapegpu.testing import event_files

SINGLE_DEVICE = True


@pytest.fixture(autouse=True)
def _no_default_step():
    tg.summary.experimental.set_step(None)
    yield
    tg.summary.experimental.set_step(None)


def _written(logdir):
    (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    evs = event_files.events(path)
    assert evs[0][3] == [b"brain.Event:2"]
    return event_files.scalars(evs)


def test_scalars_go_to_the_default_writer(tmp_path):
    writer = tg.summary.create_file_writer(str(tmp_path))
    assert not bool(tg.summary.scalar("loss", 1.0, step=0))  # no default writer yet
    with writer.as_default():
        for step, value in enumerate([0.5, 0.25, np.float64(0.125)]):
            assert bool(tg.summary.scalar("loss", value, step=step))
        assert bool(tg.summary.scalar("count", tg.constant(7), step=tg.constant(9)))
    assert not bool(tg.summary.scalar("loss", 1.0, step=5))  # the block ended
    writer.flush()
    writer.close()
    assert _written(tmp_path) == [(0, {"loss": 0.5}), (1, {"loss": 0.25}),
                                  (2, {"loss": 0.125}), (9, {"count": 7.0})]


def test_default_step_from_set_step_and_as_default(tmp_path):
    writer = tg.summary.create_file_writer(tmp_path)
    assert tg.summary.experimental.get_step() is None
    tg.summary.experimental.set_step(5)
    with writer.as_default(step=7):
        assert tg.summary.experimental.get_step() == 7
        tg.summary.scalar("a", 1.0)
    assert tg.summary.experimental.get_step() == 5
    step = tg.Variable(np.int64(11))
    tg.summary.experimental.set_step(step)
    with writer.as_default():
        tg.summary.scalar("b", 2.0)
        step.assign_add(1)
        tg.summary.scalar("b", 3.0)
    writer.close()
    assert _written(tmp_path) == [(7, {"a": 1.0}), (11, {"b": 2.0}), (12, {"b": 3.0})]


def test_scalar_in_a_function_writes_at_every_call(tmp_path):
    writer = tg.summary.create_file_writer(tmp_path)
    step = tg.Variable(np.int64(0))

    @tg.function
    def train_step(x):
        tg.summary.scalar("loss", tg.reduce_sum(x * x), step=step)
        step.assign_add(1)
        return x

    with writer.as_default():
        for i in range(4):
            train_step(tg.constant([float(i), 1.0]))
    assert train_step.experimental_get_tracing_count() == 1
    writer.close()
    assert _written(tmp_path) == [(i, {"loss": float(i * i + 1)}) for i in range(4)]


def test_scalar_errors(tmp_path):
    writer = tg.summary.create_file_writer(tmp_path)
    with writer.as_default():
        with pytest.raises(ValueError, match="No step set"):
            tg.summary.scalar("a", 1.0)
        with pytest.raises(ValueError, match="Expected scalar shape"):
            tg.summary.scalar("a", [1.0, 2.0], step=1)
        with pytest.raises(TypeError, match="integer scalar"):
            tg.summary.scalar("a", 1.0, step=1.5)
    writer.close()
    with pytest.raises(RuntimeError, match="already closed"):
        with writer.as_default():
            pass
    assert _written(tmp_path) == []
