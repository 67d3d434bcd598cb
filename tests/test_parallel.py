"""Thread helpers: results in stream order, errors at their item's turn, bounded look-ahead."""

import threading

import pytest

from grpo_cli.parallel import default_threads, ordered_map


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


def test_ordered_map_holds_at_most_threads_plus_one_items():
    started, lock = [], threading.Lock()

    def items():
        for i in range(20):
            with lock:
                started.append(i)
            yield i

    for i, _ in enumerate(ordered_map(lambda x: x, items(), threads=2)):
        assert len(started) <= i + 3
    assert 1 <= default_threads() <= 8
