"""``@capture.track`` on coroutines, generators and async generators (the task lasts as long as
they run), and in thread pools (the process's only active workflow is used)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from provkg import capture


def task_events(sink: capture.MemorySink, name: str | None = None) -> dict[str, dict[str, dict]]:
    """task id -> {"begin": event, "end": event}, for one transformation or all."""
    out: dict[str, dict[str, dict]] = {}
    for e in sink.events:
        if e["type"] == "task" and (name is None or e["transformation"] == name):
            out.setdefault(e["id"], {})[e["event"]] = e
    return out


def only(sink: capture.MemorySink, name: str) -> tuple[dict, dict]:
    (pair,) = task_events(sink, name).values()
    return pair["begin"], pair["end"]


# -- coroutines ---------------------------------------------------------------------------


@capture.track(generated="doubled")
async def slow_double(x: int, delay: float = 0.05) -> int:
    await asyncio.sleep(delay)
    inner(x)
    return 2 * x


@capture.track
def inner(x: int) -> int:
    return x


@capture.track("async_fail")
async def async_fail() -> None:
    await asyncio.sleep(0)
    raise ValueError("async boom")


def test_a_coroutine_task_lasts_until_it_returns_and_records_its_result():
    sink = capture.MemorySink()
    with capture.workflow("async", sink=sink):
        assert asyncio.run(slow_double(21)) == 42
    begin, end = only(sink, "slow_double")
    assert end["status"] == "finished"
    assert end["generated"] == [{"name": "doubled", "value": 42}]
    assert end["time"] - begin["time"] >= 0.045
    inner_begin, _ = only(sink, "inner")
    assert inner_begin["parent"] == begin["id"]  # the coroutine is the current task inside it
    assert inspect.iscoroutinefunction(slow_double)


def test_a_failing_or_cancelled_coroutine_is_a_failed_task_and_the_exception_propagates():
    sink = capture.MemorySink()

    async def cancel_one() -> None:
        pending = asyncio.ensure_future(slow_double(1, delay=10))
        await asyncio.sleep(0.01)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending

    with capture.workflow("async", sink=sink):
        with pytest.raises(ValueError, match="async boom"):
            asyncio.run(async_fail())
        asyncio.run(cancel_one())
    _, end = only(sink, "async_fail")
    assert (end["status"], end["message"]) == ("failed", "ValueError: async boom")
    _, end = only(sink, "slow_double")
    assert end["status"] == "failed" and end["message"].startswith("CancelledError")


def test_concurrent_coroutines_are_separate_tasks_with_their_own_children():
    sink = capture.MemorySink()

    async def main() -> list[int]:
        return await asyncio.gather(*(slow_double(i, delay=0.02) for i in range(5)))

    with capture.workflow("gather", sink=sink):
        assert asyncio.run(main()) == [0, 2, 4, 6, 8]
    doubles = task_events(sink, "slow_double")
    inners = task_events(sink, "inner")
    parent_of = {pair["begin"]["used"][0]["value"]: pair["begin"]["parent"]
                 for pair in inners.values()}
    x_of = {tid: pair["begin"]["used"][0]["value"] for tid, pair in doubles.items()}
    assert {x_of[parent]: x for x, parent in parent_of.items()} == {i: i for i in range(5)}


def test_a_plain_function_returning_a_coroutine_is_tracked_until_the_coroutine_is_done():
    """``@capture.track`` over another decorator whose wrapper is a plain ``def``."""

    def plain_decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper

    @capture.track("wrapped")
    @plain_decorator
    async def wrapped(x: int) -> int:
        await asyncio.sleep(0.03)
        return x + 1

    sink = capture.MemorySink()
    with capture.workflow("wrapped", sink=sink):
        assert asyncio.run(wrapped(1)) == 2
    begin, end = only(sink, "wrapped")
    assert end["generated"] == [{"name": "result", "value": 2}]
    assert end["time"] - begin["time"] >= 0.025


# -- generators ---------------------------------------------------------------------------


@capture.track("batches", generated="count")
def batches(n: int, fail_at: int | None = None):
    count = 0
    for i in range(n):
        if i == fail_at:
            raise RuntimeError(f"bad batch {i}")
        inner(i)  # runs as part of the generator's task
        count += 1
        yield i
    return count


def test_a_generator_task_spans_the_iteration_and_records_its_return_value():
    sink = capture.MemorySink()
    with capture.workflow("gen", sink=sink) as wf:
        gen = batches(3)
        time.sleep(0.03)  # the call and the first next() are apart in time
        assert wf.flush(60)  # whatever was recorded so far is in the sink
        assert task_events(sink, "batches") == {}  # nothing runs before the first next()
        started = time.time()
        items = []
        for item in gen:
            items.append(item)
            inner(100 + item)  # the consumer's calls are not the generator's children
            time.sleep(0.01)
    assert items == [0, 1, 2]
    begin, end = only(sink, "batches")
    assert begin["time"] >= started - 0.001 and end["time"] - begin["time"] >= 0.025
    assert (end["status"], end["generated"]) == ("finished", [{"name": "count", "value": 3}])
    parents = {pair["begin"]["used"][0]["value"]: pair["begin"].get("parent")
               for pair in task_events(sink, "inner").values()}
    assert parents == {0: begin["id"], 1: begin["id"], 2: begin["id"],
                       100: None, 101: None, 102: None}
    assert inspect.isgeneratorfunction(batches)


def test_a_generator_that_raises_is_a_failed_task_and_one_left_early_is_finished():
    sink = capture.MemorySink()
    with capture.workflow("gen", sink=sink):
        with pytest.raises(RuntimeError, match="bad batch 2"):
            list(batches(5, fail_at=2))
        for item in batches(5):
            if item == 1:
                break  # the generator is closed
    (failed, left) = sorted(task_events(sink, "batches").values(), key=lambda p: p["begin"]["time"])
    assert (failed["end"]["status"], failed["end"]["message"]) == \
        ("failed", "RuntimeError: bad batch 2")
    assert left["end"]["status"] == "finished" and "generated" not in left["end"]


def test_send_and_throw_reach_the_tracked_generator():
    @capture.track
    def accumulate():
        total = 0
        while True:
            try:
                total += yield total
            except KeyError:
                total = -1

    sink = capture.MemorySink()
    with capture.workflow("gen", sink=sink):
        gen = accumulate()
        assert next(gen) == 0
        assert gen.send(5) == 5
        assert gen.throw(KeyError("reset")) == -1
        time.sleep(0.02)
        closed_at = time.time()
        gen.close()
    _, end = only(sink, "accumulate")
    assert end["status"] == "finished" and end["time"] >= closed_at  # ended by close()


# -- async generators -----------------------------------------------------------------------


@capture.track("stream")
async def stream(n: int, fail_at: int | None = None):
    for i in range(n):
        if i == fail_at:
            raise RuntimeError("stream broke")
        await asyncio.sleep(0.01)
        inner(i)
        yield i


def test_an_async_generator_task_spans_the_iteration():
    sink = capture.MemorySink()

    async def consume(**kwargs) -> list[int]:
        return [i async for i in stream(3, **kwargs)]

    with capture.workflow("agen", sink=sink):
        assert asyncio.run(consume()) == [0, 1, 2]
        with pytest.raises(RuntimeError, match="stream broke"):
            asyncio.run(consume(fail_at=1))
    (ok, failed) = sorted(task_events(sink, "stream").values(), key=lambda p: p["begin"]["time"])
    assert ok["end"]["status"] == "finished" and ok["end"]["time"] - ok["begin"]["time"] >= 0.025
    assert (failed["end"]["status"], failed["end"]["message"]) == \
        ("failed", "RuntimeError: stream broke")
    assert {p["begin"]["parent"] for p in task_events(sink, "inner").values()} == \
        {ok["begin"]["id"], failed["begin"]["id"]}
    assert inspect.isasyncgenfunction(stream)


# -- thread pools ---------------------------------------------------------------------------


@capture.track
def work(i: int) -> int:
    return i * i


def test_tracked_functions_in_a_thread_pool_record_into_the_only_active_workflow():
    sink = capture.MemorySink()
    with capture.workflow("pool", sink=sink) as wf:
        with wf.task("training") as training:
            with ThreadPoolExecutor(4) as pool:
                assert list(pool.map(work, range(8))) == [i * i for i in range(8)]
                assert pool.submit(capture.current_workflow).result() is wf
                # a copy of the submitting context keeps the current task as the parent
                pool.submit(contextvars.copy_context().run, work, 99).result()
            seen = []
            thread = threading.Thread(target=lambda: seen.append(work(7)))
            thread.start()
            thread.join()
    tasks = task_events(sink, "work")
    assert len(tasks) == 10 and all(p["end"]["status"] == "finished" for p in tasks.values())
    parents = {p["begin"]["used"][0]["value"]: p["begin"].get("parent") for p in tasks.values()}
    assert parents[99] == training.id
    assert {parents[i] for i in range(8)} == {None} and parents[7] is None and seen == [49]


def test_with_several_active_workflows_a_pool_thread_does_not_guess(caplog):
    first, second = capture.MemorySink(), capture.MemorySink()
    with caplog.at_level(logging.INFO, logger="provkg.capture"):
        with capture.workflow("one", sink=first), capture.workflow("two", sink=second) as two:
            with ThreadPoolExecutor(2) as pool:
                assert list(pool.map(work, range(4))) == [0, 1, 4, 9]
                assert pool.submit(capture.current_workflow).result() is None
                bound = two.track("bound")(lambda i: i)
                assert list(pool.map(bound, range(2))) == [0, 1]
    assert task_events(first, "work") == {} and task_events(second, "work") == {}
    assert len(task_events(second, "bound")) == 2
    assert caplog.text.count("several are active") == 1
