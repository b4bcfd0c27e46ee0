"""A reply's stream read without holding the event loop: events whose data is long are read in
a worker thread (their JSON read on the loop, at any depth, mended where the Anthropic reader
mends it, held every editor request), and the loop runs between any two events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol, TypeVar

# An event's data longer than this is read off the loop: 100,000 characters mended by
# repaired_json take about 20 ms, read as JSON far less.
LONG_EVENT_CHARS = 100_000


class ReadAhead:
    """Mixed into an SDK's event: json() gives what read() gives, worked out beforehand (in a
    worker thread) where work_out was called."""

    _outcome: tuple[Any, Exception | None] | None = None

    def read(self) -> Any:
        """The event's JSON, as its provider reads it."""
        raise NotImplementedError

    def json(self) -> Any:
        if self._outcome is None:
            return self.read()
        value, error = self._outcome
        if error is not None:
            raise error
        return value

    def work_out(self) -> None:
        """read() now, its value or its error kept for json()."""
        try:
            self._outcome = (self.read(), None)
        except Exception as error:  # raised where the SDK asks for the JSON, as before
            self._outcome = (None, error)


class _Event(Protocol):
    @property
    def data(self) -> str: ...


Event = TypeVar("Event", bound=_Event)


async def read_ahead(events: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """`events`, each with long data read in a worker thread before it is passed on."""
    async for event in events:
        if isinstance(event, ReadAhead) and len(event.data) > LONG_EVENT_CHARS:
            await asyncio.to_thread(event.work_out)
        yield event


async def let_loop_run() -> None:
    """Let the loop answer what waits before the next event is handled: the SDKs hand out the
    events of one network read without a pause, and a read of tiny deltas (about 120 µs each)
    held it 0.25 to 0.45 s."""
    await asyncio.sleep(0)
