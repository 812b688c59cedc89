"""Running an asyncio-built object on its own event loop in a daemon thread, for sync callers
(tests, the CLI): the simulator's servers live on that loop until it is stopped.

Development tooling only; product code never imports the simulator.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def start_on_loop_thread(
    boot: Callable[[], Coroutine[Any, Any, T]], *, name: str, timeout: float
) -> tuple[T, asyncio.AbstractEventLoop, threading.Thread]:
    """Run ``boot()`` on a new loop in a daemon thread and keep the loop running; return what
    it built once it is up. A start-up failure is raised here, in the caller's thread.

    Stop it with ``loop.call_soon_threadsafe(loop.stop)``: pending tasks are then cancelled
    and the loop closed.
    """
    loop = asyncio.new_event_loop()
    started: concurrent.futures.Future[T] = concurrent.futures.Future()

    def main() -> None:
        asyncio.set_event_loop(loop)
        try:
            built = loop.run_until_complete(boot())
        except BaseException as exc:  # hand start-up failures to the caller's thread
            started.set_exception(exc)
            loop.close()
            return
        started.set_result(built)
        try:
            loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    thread = threading.Thread(target=main, name=name, daemon=True)
    thread.start()
    return started.result(timeout=timeout), loop, thread
