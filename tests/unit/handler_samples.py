"""Handlers for the code-kind tests: one that works (in memory), and ones that must refuse start-up."""

from settled.handlers import Applied, NotApplied, Request


class MemoryRefund:
    deduplicates = True
    authoritative_lookup = True

    def __init__(self) -> None:
        self.applied: dict[str, str] = {}

    async def dispatch(self, request: Request) -> Applied:
        reference = self.applied.setdefault(request.operation_key, f"r-{len(self.applied) + 1}")
        return Applied(reference)

    async def lookup(self, request: Request) -> Applied | NotApplied:
        reference = self.applied.get(request.operation_key)
        return Applied(reference) if reference else NotApplied()


class NoDispatch:
    pass


class SyncDispatch:
    def dispatch(self, request: Request) -> Applied:
        return Applied()


refund = MemoryRefund()
no_dispatch = NoDispatch()
sync_dispatch = SyncDispatch()
