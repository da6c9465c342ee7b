"""Where a worker's LLM calls run: one asyncio event loop per process, in a background thread.

A grading task (sync, in Celery's pool) hands its batch to this loop and stays the batch's
only database user: it stores results as they come back, renews its lease and notices a
cancel, while the loop keeps up to the run's concurrency of calls in flight. The loop lives
as long as the process, so HTTP connections and Redis scripts carry over from batch to
batch. Nothing here touches the database: Django's ORM is not for event loops.

``run_lanes`` is the scheduler. A lane is one slot of the run's concurrency bound, held
while there is work for it: it takes the next job, awaits it, reports the result, and gives
the slot back when the batch has no more jobs, or when this task holds more than its fair
share of the run's slots (grading.pipeline.slots). A task asks for more slots every
``POLL_SECONDS`` while it has waiting jobs, so freed slots are picked up at once. Lanes
that end wake the scheduler, which gives their slots back in its next request: one Redis
call per round, whatever the number of lanes.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

J = TypeVar("J")
R = TypeVar("R")
POLL_SECONDS = 0.05
# Lanes granted together start this far apart: started at once, their calls would come
# back at once too, and each wave would queue on the event loop (worse with an endpoint of
# steady latency, where the waves never spread out).
STAGGER_SECONDS = 0.004


class Slots(Protocol):
    # Give back `released`, ask for `wanted`: (granted, the most to hold now).
    async def acquire(self, wanted: int, released: int = 0) -> tuple[int, int]: ...

    async def close(self) -> None: ...


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
            atexit.register(_close_clients, _loop)
        loop = _loop
    return asyncio.run_coroutine_threadsafe(coro, loop)


def _close_clients(loop: asyncio.AbstractEventLoop) -> None:
    # Closed HTTP sessions leave quietly; unclosed ones complain as the interpreter exits.
    from grading.pipeline.endpoint_clients import close_clients

    if loop.is_running():
        # Exiting anyway: a session that fails to close only costs the warning.
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close_clients(), loop).result(timeout=5)


async def run_lanes(
    jobs: Sequence[J],
    work: Callable[[J], Awaitable[R]],
    emit: Callable[[J, R], None],
    *,
    concurrency: int,
    slots: Slots,
    stop: threading.Event,
    heartbeat: float = 0.25,
) -> None:
    """Do every job with at most `concurrency` in flight and within the slots granted.

    After `stop` is set no job starts; those in flight finish and are emitted. Cancelling
    the coroutine cancels the jobs in flight. `work` must not raise for expected faults: an
    exception is a bug and ends the batch. `heartbeat` must be well under the slots' expiry."""
    pending = deque(jobs)
    lanes: set[asyncio.Task] = set()
    active = 0  # lanes that hold a slot
    starting = 0  # of those, lanes that have not taken their first job yet
    retiring = 0  # lanes to give their slot back after their current job
    freed = 0  # slots of ended lanes, to give back with the next request (one Redis call)

    async def lane(delay: float) -> None:
        nonlocal active, starting, retiring, freed
        started = False
        try:
            await asyncio.sleep(delay)
            starting, started = starting - 1, True
            while pending and not stop.is_set():
                if retiring:
                    retiring -= 1
                    break
                job = pending.popleft()
                emit(job, await work(job))
        finally:
            if not started:
                starting -= 1
            active -= 1
            freed += 1

    try:
        while lanes or (pending and not stop.is_set()):
            # Jobs nobody will take: lanes still starting will each take one.
            untaken = len(pending) - starting
            wanted = 0 if stop.is_set() else max(0, min(concurrency - active, untaken))
            released, freed = freed, 0
            granted, cap = await slots.acquire(wanted, released)
            for k in range(granted):
                active += 1
                starting += 1
                lanes.add(asyncio.create_task(lane(k * STAGGER_SECONDS)))
            retiring = max(0, active - cap)
            # Short of slots (other tasks of the run hold them): ask again soon.
            timeout = POLL_SECONDS if granted < wanted else heartbeat
            if lanes:
                done, lanes = await asyncio.wait(lanes, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
            else:
                await asyncio.sleep(timeout)
    finally:
        for task in lanes:
            task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)
        await asyncio.shield(slots.close())
