"""Where a worker's LLM calls run: one asyncio event loop per process, in a background thread.

A grading task (sync, in Celery's pool) hands its batch to this loop and stays the batch's
only database user: it stores results as they come back, renews its lease and notices a
cancel, while the loop keeps up to the run's concurrency of calls in flight. The loop lives
as long as the process, so HTTP connections and Redis scripts carry over from batch to
batch. Nothing here touches the database: Django's ORM is not for event loops.

``run_lanes`` is the scheduler. A lane is one slot of the run's concurrency bound, held
while there is work for it: it takes the next job, awaits it, reports the result, and gives
the slot back when the batch has no more jobs, or when this task holds more than its fair
share of the run's slots (grading.run_slots). A task asks for more slots every
``POLL_SECONDS`` while it has waiting jobs, so freed slots are picked up at once. Lanes
that end wake the scheduler, which gives their slots back in its next request: one Redis
call per round, whatever the number of lanes.
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
    heartbeat: float = 0.25,
) -> None:
    """Do every job with at most `concurrency` in flight and within the slots granted.

    After `stop` is set no job starts; those in flight finish and are emitted. Cancelling
    the coroutine cancels the jobs in flight. `work` must not raise for expected faults: an
    exception is a bug and ends the batch. `heartbeat` must be well under the slots' expiry."""
    pending = deque(jobs)
    lanes: set[asyncio.Task] = set()
    active = 0  # lanes that hold a slot
    retiring = 0  # of those, lanes to give it back after their current job
    freed = 0  # slots of ended lanes, to give back with the next request (one Redis call)

    async def lane() -> None:
        nonlocal active, retiring, freed
        try:
            while pending and not stop.is_set():
                if retiring:
                    retiring -= 1
                    break
                job = pending.popleft()
                emit(job, await work(job))
        finally:
            active -= 1
            freed += 1

    try:
        while lanes or (pending and not stop.is_set()):
            wanted = 0 if stop.is_set() else max(0, min(concurrency - active, len(pending)))
            released, freed = freed, 0
            granted, cap = await slots.acquire(wanted, released)
            if os.environ.get("HB_TRACE"):
                with open(os.environ["HB_TRACE"], "a") as f:
                    import time as _t
                    f.write(f"{_t.time():.3f} {os.getpid()} {id(slots)%1000} active={active} pending={len(pending)} wanted={wanted} rel={released} granted={granted} cap={cap}\n")
            for _ in range(granted):
                active += 1
                lanes.add(asyncio.create_task(lane()))
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
