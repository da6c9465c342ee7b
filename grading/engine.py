"""Where a worker's LLM calls run: one asyncio event loop per process, in a background thread.

A grading task (sync, in Celery's pool) hands its batch to this loop and stays the batch's
only database user: it stores results as they come back, renews its lease and notices a
cancel, while the loop keeps up to the run's concurrency of calls in flight. The loop lives
as long as the process, so HTTP connections and Redis scripts carry over from batch to
batch. Nothing here touches the database: Django's ORM is not for event loops.

``run_lanes`` is the scheduler. A lane is one slot of the run's concurrency bound, held
while there is work for it: it takes the next job, awaits it, reports the result, and gives
the slot back when the batch has no more jobs. A task asks for more slots while it has
waiting jobs, so slots that another task frees are picked up within ``POLL_SECONDS``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

J = TypeVar("J")
R = TypeVar("R")
POLL_SECONDS = 0.05


class Slots(Protocol):
    refresh_seconds: float  # how often a holder renews its slots

    async def acquire(self, wanted: int) -> int: ...

    async def release(self, n: int = 1) -> None: ...

    async def refresh(self) -> None: ...


_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _forget_loop() -> None:
    # A forked child (Celery's prefork pool) has no copy of the parent's thread: start its own.
    global _loop
    _loop = None


os.register_at_fork(after_in_child=_forget_loop)


def submit(coro: Coroutine[Any, Any, R]) -> concurrent.futures.Future[R]:
    """Run `coro` on this process's event loop; returns a thread-safe future."""
    global _loop
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="grading-event-loop", daemon=True).start()
        loop = _loop
    return asyncio.run_coroutine_threadsafe(coro, loop)


async def run_lanes(
    jobs: Sequence[J],
    work: Callable[[J], Awaitable[R]],
    emit: Callable[[J, R], None],
    *,
    concurrency: int,
    slots: Slots,
    stop: threading.Event,
) -> None:
    """Do every job with at most `concurrency` in flight and within the slots granted.

    After `stop` is set no job starts; those in flight finish and are emitted. Cancelling
    the coroutine cancels the jobs in flight. `work` must not raise for expected faults: an
    exception is a bug and ends the batch."""
    loop = asyncio.get_running_loop()
    pending = deque(jobs)
    lanes: set[asyncio.Task] = set()

    async def lane() -> None:
        try:
            while pending and not stop.is_set():
                job = pending.popleft()
                emit(job, await work(job))
        finally:
            await asyncio.shield(slots.release(1))

    next_refresh = loop.time() + slots.refresh_seconds
    try:
        while lanes or (pending and not stop.is_set()):
            wanted = 0 if stop.is_set() else min(concurrency - len(lanes), len(pending))
            granted = await slots.acquire(wanted) if wanted > 0 else 0
            for _ in range(granted):
                lanes.add(asyncio.create_task(lane()))
            # Short of slots (other tasks of the run hold them): ask again soon.
            starved = granted < wanted
            timeout = POLL_SECONDS if starved or not lanes else max(0.0, next_refresh - loop.time())
            if lanes:
                done, lanes = await asyncio.wait(lanes, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
            else:
                await asyncio.sleep(timeout)
            if loop.time() >= next_refresh:
                await slots.refresh()
                next_refresh = loop.time() + slots.refresh_seconds
    finally:
        for task in lanes:
            task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)
