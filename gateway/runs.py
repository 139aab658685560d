"""Every run a workflow id has had, oldest first, for whatever reads an action across its runs (the
time-skipping tests, `settled replay`, the bench's counts). Runs of one workflow id are linked by
continue-as-new (a run's start names the run it continued) and, where a late control opened a closed
action again, by the new run's input (`ActionStart.reopens`, the run it was opened from): Temporal
links those to nothing."""

from settled.workflows.messages import ActionStart
from temporalio.api.history.v1 import WorkflowExecutionStartedEventAttributes
from temporalio.client import Client, WorkflowHistory

ACTION_WORKFLOW_TYPE = "Action"


async def every_run(client: Client, workflow_id: str, run_id: str | None = None) -> list[WorkflowHistory]:
    """The history of every run up to `run_id` (default: the latest run), oldest first."""
    histories: list[WorkflowHistory] = []
    previous: str | None = run_id
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=previous).fetch_history()
        histories.insert(0, history)
        started = history.events[0].workflow_execution_started_event_attributes
        previous = started.continued_execution_run_id or await _reopened_from(client, started)
        if not previous:
            return histories


async def _reopened_from(client: Client, started: WorkflowExecutionStartedEventAttributes) -> str | None:
    if started.workflow_type.name != ACTION_WORKFLOW_TYPE:
        return None
    [start] = await client.data_converter.decode(started.input.payloads, [ActionStart])
    return start.reopens
