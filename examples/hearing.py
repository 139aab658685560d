"""What the caller heard, for the examples' audio outputs, which play at real speed: each notes what
it played (`heard_of`, `finished`, `changed`); a caller script or a test waits on it with `until`."""

import asyncio


class Hearing:
    """Mixed into an audio output that keeps `finished` (the texts whose audio all played), `changed`
    (set on each played frame) and `heard_of` (ms heard of the text that says a part)."""

    finished: list[str]
    changed: asyncio.Event

    def heard_of(self, part: str) -> float:
        raise NotImplementedError

    async def until(self, part: str, heard_ms: float | None = None, timeout_s: float = 20) -> None:
        """Until the caller heard `heard_ms` of the text that says `part` (None: all of it)."""

        def reached() -> bool:
            if heard_ms is None:
                return any(part in text for text in self.finished)
            return self.heard_of(part) >= heard_ms

        async with asyncio.timeout(timeout_s):
            while not reached():
                self.changed.clear()
                await self.changed.wait()
