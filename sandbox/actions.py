"""The business operations themselves, as Actions the fault handling can apply or abandon."""

from collections.abc import Callable
from typing import Any

from settled.sandbox.db import now
from settled.sandbox.handling import Reply, error_reply
from settled.sandbox.services import ServiceSpec
from settled.sandbox.settling import Settlement, TransferSettings
from settled.sandbox.store import Record, Store


def not_found(spec: ServiceSpec, what: str) -> Reply:
    return error_reply(404, "not_found", f"no {spec.name} record for {what}", "not_found")


class Create:
    def __init__(
        self,
        store: Store,
        spec: ServiceSpec,
        payload: dict[str, Any],
        client_reference: str | None,
        key: str | None = None,
        token: str | None = None,
        settings: TransferSettings | None = None,
    ) -> None:
        self._store, self._spec, self._payload = store, spec, payload
        self._client_reference, self._key, self._token = client_reference, key, token
        self._settings = settings
        self._settled = False

    def apply(self) -> Reply:
        assert not self._settled, "a create is applied at most once"
        self._settled = True
        # Decided when it commits (a delayed or held create starts its pending time then).
        settlement = (
            Settlement.decide(self._settings, self._payload)
            if self._spec.finishes_later and self._settings is not None
            else None
        )
        _, body = self._store.create(
            self._spec, self._payload, self._client_reference, self._key, self._token, settlement
        )
        return Reply(self._spec.created_http, body, "applied")

    def abandon(self) -> None:
        # Only an unapplied keyed request holds a claim; freeing it lets the key be used again.
        if self._settled:
            return
        self._settled = True
        if self._key is not None and self._token is not None:
            self._store.release(self._spec.name, self._key, self._token)


class Lookup:
    def __init__(
        self,
        spec: ServiceSpec,
        find: Callable[[], Record | None],
        what: str,
        in_flight: Callable[[], bool] = lambda: False,
    ) -> None:
        self._spec, self._find, self._what, self._in_flight = spec, find, what, in_flight

    def apply_lagging(self, lag_s: float) -> Reply:
        """Read from a replica `lag_s` behind: what committed since is missing, and nothing is known
        of writes in flight. A lookup served this way answers 404 for a write that already stands."""
        record = self._find()
        cutoff = now(ago_s=lag_s)
        if record is None or record.committed_at is None or record.committed_at > cutoff:
            return not_found(self._spec, self._what)
        return Reply(200, record.view(self._spec, cutoff), "found")

    def apply(self) -> Reply:
        # Read when applied, not when the request arrived: a delayed lookup sees the state after the delay.
        record = self._find()
        if record is None and self._in_flight():
            # Not "never applied": the write is being processed. An authoritative 404 now would invite
            # a second write; a real service must answer this way too for its lookup to be authoritative.
            return error_reply(
                409, "in_progress", f"a request for {self._what} is in progress", "in_progress"
            )
        if record is None:
            return not_found(self._spec, self._what)
        return Reply(200, record.view(self._spec), "found")

    def abandon(self) -> None:
        pass


class Cancel:
    def __init__(self, store: Store, spec: ServiceSpec, record_id: str) -> None:
        self._store, self._spec, self._id = store, spec, record_id

    def apply(self) -> Reply:
        if not self._spec.reversible:
            if self._store.get(self._spec.name, self._id) is None:
                return not_found(self._spec, self._id)
            message = f"{self._spec.name} cannot be reversed"
            return error_reply(409, "not_reversible", message, "not_reversible")
        record, changed = self._store.cancel(self._spec, self._id)
        if record is None:
            return not_found(self._spec, self._id)
        status = record.status_at()
        if not changed and status != self._spec.cancelled_status:
            # A transfer that has finished can no longer be cancelled: a final refusal (400, as a
            # payments API answers), not a 409 a client would read as "may still happen".
            message = f"{self._spec.name} record {self._id} is {status}; only a pending one can be cancelled"
            return error_reply(400, "already_finished", message, "already_finished")
        return Reply(200, record.view(self._spec), "cancelled" if changed else "already_cancelled")

    def abandon(self) -> None:
        pass
