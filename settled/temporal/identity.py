"""Names derived from ids: the operation key sent to services, and the Temporal workflow ids.

Both carry the tenant when API keys are configured, so two tenants' ids never meet, neither in a
service's deduplication nor in Temporal.
"""

TASK_QUEUE = "settled"
# Each kind has a task queue of its own (its bulkhead) for the business calls beyond its share of the
# shared worker: its own worker slots, its own backlog, so a slow service holds back only its own kind
# (settled.activities.lanes, docs/deployment.md).
KIND_QUEUE_PREFIX = "settled-kind-"


def kind_task_queue(kind: str) -> str:
    return f"{KIND_QUEUE_PREFIX}{kind}"


def operation_key(tenant: str | None, operation_id: str) -> str:
    return f"{tenant}:{operation_id}" if tenant else operation_id


def action_workflow_id(tenant: str | None, operation_id: str) -> str:
    return f"settled-action:{operation_key(tenant, operation_id)}"


def conversation_workflow_id(tenant: str | None, conversation_id: str) -> str:
    return f"settled-conversation:{operation_key(tenant, conversation_id)}"
