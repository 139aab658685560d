"""A Temporal worker for settled's workflows and activities, as `settled worker` and the API host one.

The API hosts one on its own client so that Temporal can start an action eagerly: the first workflow
task comes back in the start's answer and runs in the API process, with no trip through the task
queue, and an activity that task schedules (a send recorded before it leaves) is handed back to it
eagerly too. The two are the same worker: any of them may run any task.

Each kind also has a queue of its own (`kind_workers`: one worker per kind, its own slots and HTTP
pool), where a business call goes when its kind has no more room on the shared worker
(settled.activities.lanes).
"""

from collections.abc import Collection, Iterable
from datetime import timedelta
from typing import Any

import httpx
from settled.activities.business import BusinessActivities
from settled.activities.lanes import SharedLane, queue_slots
from settled.workflows.action import ActionWorkflow
from settled.workflows.conversation import ConversationWorkflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from settled.domain.kinds import KindSpec
from settled.temporal.identity import TASK_QUEUE, kind_task_queue

WORKFLOWS = [ActionWorkflow, ConversationWorkflow]
STICKY_TIMEOUT = timedelta(seconds=3)
# Pure modules shared with the API: loaded once per process, not re-imported per workflow run.
PASSED_THROUGH = (
    "settled",
    "settled.workflows.messages",
    "settled.activities.inputs",
    "pydantic",
    "pydantic_core",
    "jsonschema",
    "jmespath",
)


def workflow_runner(sandboxed: bool) -> WorkflowRunner:
    """How the workflow code runs. The worker and the API run it as it is, as Temporal's own floor
    does: the sandbox re-imports the workflow module for every new run and proxies each call into
    it, some 3 ms of CPU per new action on the caller's path. The sandbox still watches the same
    code (`sandboxed=True`) wherever determinism is checked: every replay of the golden histories,
    the time-skipping tests and `settled replay`, each of which fails on a call it forbids (a clock,
    randomness, I/O) in any path they run."""
    if not sandboxed:
        return UnsandboxedWorkflowRunner()
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH)
    )


def build_worker(
    client: Client,
    http: httpx.AsyncClient,
    handlers: dict[str, Any] | None = None,
    cached_workflows: int = 500,
    sandboxed: bool = False,
    served: Collection[str] | None = None,
) -> Worker:
    """The shared worker: every workflow task, and the business calls each kind has room for here
    (`SharedLane`; only of the kinds in `served`, None: all). `handlers`: the imported handler of each
    code kind (settled.business.startup.prepare)."""
    return Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=WORKFLOWS,
        activities=BusinessActivities(http, handlers).all(),
        workflow_runner=workflow_runner(sandboxed),
        max_concurrent_activities=200,
        max_cached_workflows=cached_workflows,
        # A task or query for a workflow cached by a worker that died (an API killed mid-call) goes
        # to any worker after this long, not after the SDK's 10 s: reads of it stall that long.
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
        graceful_shutdown_timeout=timedelta(seconds=5),
        interceptors=[SharedLane(served)],
    )


def kind_http(kind: KindSpec) -> httpx.AsyncClient:
    """The kind's own connection pool: as many connections as its queue has slots."""
    slots = queue_slots(kind)
    return httpx.AsyncClient(limits=httpx.Limits(max_connections=slots, max_keepalive_connections=slots))


def kind_worker(
    client: Client, kind: KindSpec, http: httpx.AsyncClient, handlers: dict[str, Any] | None = None
) -> Worker:
    """The worker of one kind's queue: its business activities only, `queue_slots(kind)` at once; the
    rest of its backlog waits in Temporal, durably, holding nothing here."""
    slots = queue_slots(kind)
    return Worker(
        client,
        task_queue=kind_task_queue(kind.name),
        activities=BusinessActivities(http, handlers).all(),
        max_concurrent_activities=slots,
        max_concurrent_activity_task_polls=min(5, slots),
        graceful_shutdown_timeout=timedelta(seconds=5),
    )


def kind_workers(
    client: Client, kinds: Iterable[KindSpec], handlers: dict[str, Any] | None = None
) -> list[tuple[Worker, httpx.AsyncClient]]:
    """One worker and one HTTP pool per kind; close each pool after its worker has stopped."""
    pairs = []
    for kind in kinds:
        http = kind_http(kind)
        pairs.append((kind_worker(client, kind, http, handlers), http))
    return pairs
