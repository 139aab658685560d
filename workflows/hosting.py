"""A Temporal worker for settled's workflows and activities, as `settled worker` and the API host one.

The API hosts one on its own client so that Temporal can start an action eagerly: the first workflow
task comes back in the start's answer and runs in the API process, with no trip through the task
queue, and an activity that task schedules (a send recorded before it leaves) is handed back to it
eagerly too. The two are the same worker: any of them may run any task.
"""

from datetime import timedelta
from typing import Any

import httpx
from settled.activities.business import BusinessActivities
from settled.workflows.action import ActionWorkflow
from settled.workflows.conversation import ConversationWorkflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from settled.identity import TASK_QUEUE

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
) -> Worker:
    """`handlers`: the imported handler of each code kind (settled.business.startup.prepare)."""
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
    )
