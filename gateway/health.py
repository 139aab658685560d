"""Whether workers poll the task queues settled uses: what the API's readiness and the operators'
commands ask."""

import asyncio
from datetime import timedelta

from settled.gateway.link import Link
from temporalio.api.enums.v1 import DescribeTaskQueueMode, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue, TaskQueueVersionSelection
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from settled.temporal.identity import TASK_QUEUE, kind_task_queue


class Health:
    def __init__(self, link: Link) -> None:
        self.link = link

    async def worker_polling(self) -> bool:
        """Whether a worker polls every task queue settled uses: the workflow queue and each kind's own
        (its business activities). The queues are described at once, not one after another."""
        queues = [self.pollers(TASK_QUEUE, workflows=True)] + [
            self.pollers(kind_task_queue(spec.name)) for spec in self.link.kinds
        ]
        return all(await asyncio.gather(*queues))

    async def pollers(self, queue: str, workflows: bool = False) -> set[str]:
        """The identities of the workers polling `queue` (its activity side, or its workflow side).

        A task queue is split into partitions, and the plain description reports only the root
        partition's pollers: a worker whose few polls wait on other partitions is missing from it.
        The enhanced description asks every partition."""
        side = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW if workflows else TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
        request = DescribeTaskQueueRequest(
            namespace=self.link.settings.namespace,
            task_queue=TaskQueue(name=queue),
            api_mode=DescribeTaskQueueMode.DESCRIBE_TASK_QUEUE_MODE_ENHANCED,
            versions=TaskQueueVersionSelection(unversioned=True),
            task_queue_types=[side],
            report_pollers=True,
        )
        response = await self.link.client.workflow_service.describe_task_queue(
            request, timeout=timedelta(seconds=2)
        )
        return {
            poller.identity
            for version in response.versions_info.values()
            for info in version.types_info.values()
            for poller in info.pollers
        }
