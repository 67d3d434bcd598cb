"""Thread helpers: results in stream order, errors at their item's turn, bounded look-ahead."""

import os
import threading

import pytest

from grpo_cli.parallel import default_threads, max_in_flight, ordered_map


def test_ordered_map_keeps_order_and_raises_at_the_item():
    assert list(ordered_map(lambda x: x * x, range(10), threads=3)) == [x * x for x in range(10)]

    def fail_on_three(x):
        if x == 3:
            raise ValueError("three")
        return x

    results = ordered_map(fail_on_three, range(6), threads=2)
    assert [next(results) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="three"):
        next(results)


@pytest.mark.parametrize("threads", [2, 1000])
def test_ordered_map_holds_at_most_its_calls_in_flight_plus_one_items(threads):
    """At most one item more than the calls in flight is taken from the stream; the calls in
    flight are capped whatever ``threads`` asks for (1000 threads once held a whole 1 GB file)."""
    taken, lock = [], threading.Lock()

    def items():
        for i in range(200):
            with lock:
                taken.append(i)
            yield i

    in_flight = min(threads, max_in_flight())
    for i, x in enumerate(ordered_map(lambda x: x, items(), threads=threads)):
        assert x == i
        assert len(taken) <= i + in_flight + 1
    assert max_in_flight() <= 4 * (os.cpu_count() or 1)
    assert 1 <= default_threads() <= os.cpu_count()


def test_default_threads_use_every_core_the_process_may_use(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert default_threads() == 16
