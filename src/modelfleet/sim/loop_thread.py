"""Running an asyncio-built object on its own event loop in a daemon thread, for synchronous
callers (tests, benchmarks): the simulator's API server or a whole simulated fleet lives on that
loop, and the caller's thread reaches it only through :meth:`LoopThread.call` and
:meth:`LoopThread.run`.

Development tooling only; product code never imports the simulator. Starts one thread and one
event loop; no other I/O.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

__all__ = ["LoopThread", "Stoppable"]

P = ParamSpec("P")
R = TypeVar("R")


class Stoppable(Protocol):
    async def stop(self) -> None: ...


T = TypeVar("T", bound=Stoppable)


class LoopThread(Generic[T]):
    """``target``, built by a coroutine on a new event loop that a daemon thread keeps running.

    Every method is safe to call from any thread. Use it as a context manager, or call
    :meth:`stop`: it awaits ``target.stop()`` on the loop, then ends the loop and the thread.
    """

    def __init__(self, target: T, loop: asyncio.AbstractEventLoop, thread: threading.Thread):
        self.target = target
        self.loop = loop
        self._thread = thread
        self._stopped = False

    @classmethod
    def start(
        cls, boot: Callable[[], Coroutine[Any, Any, T]], *, name: str, timeout: float
    ) -> LoopThread[T]:
        """Run ``boot()`` on a new loop in a daemon thread named ``name`` and keep the loop
        running; return once it has built its target. A start-up failure is raised here, in the
        caller's thread."""
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
        return cls(started.result(timeout=timeout), loop, thread)

    def run(self, coro: Coroutine[Any, Any, R], timeout: float | None = 30.0) -> R:
        """Run a coroutine on the loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(*args, **kwargs)`` on the loop (within 30 s) and return its result."""

        async def on_loop() -> R:
            return fn(*args, **kwargs)

        return self.run(on_loop())

    def stop(self, timeout: float = 15.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            self.run(self.target.stop(), timeout=timeout)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)

    def __enter__(self) -> LoopThread[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
