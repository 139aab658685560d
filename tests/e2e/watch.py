"""A witness for crash tests: reads the actions' status again and again while processes die, keeping
every answer with the time it was asked and received, then judges them against the sandbox's records
(sandbox.truth: `done` only once a record had committed, `not_done` never while one stood)."""

import threading
import time
from collections import Counter
from types import TracebackType

import httpx
from settled.sandbox.truth import Observation, Verdict, judge

READ_TIMEOUT_S = 5.0
ROUND_PAUSE_S = 0.1
# A bound on the loop whatever happens to the test that started it.
MAX_WATCH_S = 600.0


class ClaimWatcher:
    def __init__(self, api_url: str, operation_ids: list[str] | None = None) -> None:
        self._api_url = api_url
        self._ids = list(operation_ids or [])
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="claim-watcher", daemon=True)
        self.observations: list[Observation] = []
        self.failures: Counter[str] = Counter()  # reads that got no status (API or worker down)

    def watch(self, operation_id: str) -> None:
        with self._lock:
            self._ids.append(operation_id)

    def __enter__(self) -> "ClaimWatcher":
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(READ_TIMEOUT_S * 2)

    def _run(self) -> None:
        deadline = time.monotonic() + MAX_WATCH_S
        with httpx.Client(base_url=self._api_url, timeout=READ_TIMEOUT_S) as http:
            while not self._stop.is_set() and time.monotonic() < deadline:
                with self._lock:
                    ids = list(self._ids)
                for operation_id in ids:
                    self._read(http, operation_id)
                self._stop.wait(ROUND_PAUSE_S)  # pacing between rounds, not waiting for a condition

    def _read(self, http: httpx.Client, operation_id: str) -> None:
        sent = time.time()
        try:
            response = http.get(f"/v1/actions/{operation_id}")
        except httpx.HTTPError as error:
            self.failures[type(error).__name__] += 1
            return
        received = time.time()
        if response.status_code != 200:
            self.failures[str(response.status_code)] += 1
            return
        with self._lock:
            self.observations.append(Observation.of(response.json(), sent, received, "watch"))

    def verdict(self, api: httpx.Client, sandbox: httpx.Client) -> Verdict:
        """Judge every answer seen, and each action's final status, against the records."""
        self.stop()
        with self._lock:
            ids = list(self._ids)
        final = [api.get(f"/v1/actions/{operation_id}").json() for operation_id in ids]
        rows = sandbox.get("/_sandbox/records").json()["records"]
        return judge(self.observations, final, rows, ids)

    def claims_of(self, operation_id: str) -> list[str]:
        return [o.claim for o in self.observations if o.operation_id == operation_id]
