"""The collector pause around bulk reads: counted across threads, and never turns on what was off."""

from __future__ import annotations

import gc
import threading

from gpuaas.sources.bulk import collector_paused


def test_the_collector_resumes_only_when_the_last_reader_is_done() -> None:
    assert gc.isenabled()
    inside, leave = threading.Event(), threading.Event()

    def reader() -> None:
        with collector_paused():
            inside.set()
            leave.wait(10)

    other = threading.Thread(target=reader)
    other.start()
    inside.wait(10)
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other reader is still decoding
    leave.set()
    other.join(10)
    assert gc.isenabled()


def test_a_collector_someone_else_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_in_the_block_resumes_the_collector() -> None:
    try:
        with collector_paused():
            raise ValueError("malformed page")
    except ValueError:
        pass
    assert gc.isenabled()
