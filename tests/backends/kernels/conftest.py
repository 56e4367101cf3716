"""Shared fixtures for the kernel and emulator tests.

Libraries are built into the default emulator cache (~/.cache/tapegpu/emu, or
$TAPEGPU_EMU_CACHE), so a second run starts warm; the build-cache tests use
their own temporary directories."""

import os

import pytest

from tapegpu.backends.emu import RawModule

BROKEN = os.path.join(os.path.dirname(__file__), "broken")
ORDERS = ("forward", "reverse")


@pytest.fixture
def broken():
    """broken(name, **kwargs): a RawModule of tests/kernels/broken/<name>.cu."""
    def load(name, **kwargs):
        return RawModule(path=os.path.join(BROKEN, name + ".cu"), **kwargs)
    return load


@pytest.fixture(params=ORDERS)
def order(request):
    return request.param
