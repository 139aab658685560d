"""One interrupted refund, one trace: the agent's tool call (OpenTelemetry's SDK, in-memory exporter)
through the API, the workflow, the dispatch whose answer is lost, the lookup that confirms it and the
`presented` call, exported by the real API and worker processes with the SDK's OTLP exporter to a
receiver over HTTP. The sandbox's request log shows the service saw the trace; no span holds a
param, a secret, a sentence or a query string."""

import asyncio
import inspect
import json
import os
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from settled.adapters.common import derived_operation_id, load_action_kinds

from examples.scripted import RefundScript
from settled.client import SettledClient
from settled.domain.kinds import Variant
from settled.domain.states import State
from settled.runtime.stack import Stack
from tests.e2e.otlp import ReceivedSpan, Receiver
from tests.helpers import FAST, REFUND, TEST_KINDS, Sandbox, create, new_id, sandbox_of, wait_for

TOKEN = "tok-5e1d77a0-trace-secret"
ORDER = "o-trace-4417"  # a param: must appear in no span
KINDS = {
    **TEST_KINDS,
    "secret_refund": Variant(
        "refund", {**FAST, "auth": {"type": "bearer", "token": "{secret.REFUND_TOKEN}"}}
    ),
}
# The HTTP attribute names OpenTelemetry's stable conventions replaced.
DEPRECATED = {"http.method", "http.status_code", "http.target", "http.url", "http.scheme", "http.host"}
DEPRECATED |= {"http.flavor", "http.user_agent", "http.server_name", "net.peer.ip", "net.host.port"}
ENV = {
    "REFUND_TOKEN": TOKEN,
    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    "OTEL_BSP_SCHEDULE_DELAY": "100",  # export within a tenth of a second, not five
}


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver().running() as running:
        yield running


@pytest.fixture(scope="module")
def traced_stack(receiver: Receiver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {**ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    stack = Stack.on_free_ports(tmp_path_factory.mktemp("traces"), KINDS, ui=False, extra_env=env)
    with stack.running():
        yield stack


@pytest.fixture(scope="module")
def traced_sandbox(traced_stack: Stack) -> Iterator[Sandbox]:
    with sandbox_of(traced_stack) as truth:
        yield truth


def _named(spans: list[ReceivedSpan], prefix: str, **attributes: Any) -> list[ReceivedSpan]:
    return [
        span
        for span in spans
        if span.name.startswith(prefix) and all(span.attributes.get(k) == v for k, v in attributes.items())
    ]


async def test_an_interrupted_refund_is_one_connected_trace(
    traced_stack: Stack, traced_sandbox: Sandbox, receiver: Receiver
) -> None:
    tool_spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(tool_spans))
    tracer = provider.get_tracer("the agent")
    op, conversation = new_id(), new_id("c")
    params = {"order_id": ORDER, "amount": 31.75, "currency": "EUR"}
    traced_sandbox.fault("refunds", "create", "drop_after_apply", op)

    async with SettledClient(traced_stack.api_url) as settled:
        with tracer.start_as_current_span("function_tool refund") as tool:
            created = await settled.create_action(
                conversation, "secret_refund", params, operation_id=op, authorized=True, wait=3
            )
            assert created.state in (State.UNKNOWN, State.RUNNING, State.CONFIRMED)
            await settled.conversation_event(conversation, "interrupted", "voice")
            confirmed = await settled.await_settled(op, timeout_s=30)
            assert confirmed.state == State.CONFIRMED
            assert "unknown" in [change.state for change in confirmed.history]
            await settled.presented(op, "voice", confirmed.say, True, for_state=State.CONFIRMED)
    trace_id = format(tool.get_span_context().trace_id, "032x")
    tool_id = format(tool.get_span_context().span_id, "016x")

    # The service saw the trace: the write whose answer was lost and the lookup both carried it.
    requests = traced_sandbox.requests(op)
    assert [r["op"] for r in requests][:2] == ["create", "lookup"] and len(_writes(requests)) == 1
    assert all(r["traceparent"] and r["traceparent"].split("-")[1] == trace_id for r in requests)

    def complete() -> list[ReceivedSpan] | None:
        spans = receiver.of_trace(trace_id)
        known = {span.span_id for span in spans} | {tool_id}
        wanted = (
            _named(spans, "settled.dispatch secret_refund", **{"settled.outcome": "unknown"})
            and _named(spans, "settled.lookup secret_refund", **{"settled.outcome": "applied"})
            and _named(spans, "POST /v1/actions/{operation_id}/presented")
            and _named(spans, "HandleUpdate:presented")
        )
        return spans if wanted and all(span.parent_id in known for span in spans) else None

    spans = wait_for(complete, timeout_s=30, what="the refund's spans from the API and the worker")
    assert {span.service for span in spans} >= {"settled-api"}
    # One tree: every span's parent is the tool call or another span of the trace.
    assert all(span.parent_id in {s.span_id for s in spans} | {tool_id} for span in spans)
    for prefix in ("POST /v1/actions", "StartWorkflow:Action", "RunWorkflow:Action", "RunActivity:dispatch"):
        assert _named(spans, prefix), f"no {prefix} span in {sorted({s.name for s in spans})}"
    dispatch = _named(spans, "settled.dispatch secret_refund")[0]
    sandbox = httpx.URL(traced_stack.sandbox_url)
    # A client span by the stable HTTP conventions: where the request went, never its query.
    where = {"http.request.method": "POST", "server.address": sandbox.host, "server.port": sandbox.port}
    assert dispatch.attributes == {
        "settled.call": "dispatch",
        "settled.operation_id": op,
        "settled.kind": "secret_refund",
        "settled.attempt": 0,  # no dispatch of it before this one
        "settled.code_kind": False,
        "settled.outcome": "unknown",  # the answer was lost: no status code
        **where,
        "url.full": dispatch.attributes["url.full"],
    }
    assert dispatch.attributes["url.full"].startswith(f"{traced_stack.sandbox_url}/")
    assert "?" not in dispatch.attributes["url.full"]
    # A route that answered of an action names it and the state it reached.
    presented = _named(spans, "POST /v1/actions/{operation_id}/presented")[0].attributes
    assert (presented["settled.operation_id"], presented["settled.state"]) == (op, "confirmed")
    assert presented["settled.kind"] == "secret_refund"
    lookup = _named(spans, "settled.lookup secret_refund")[0]
    assert lookup.attributes["http.response.status_code"] == 200 and lookup.start_ns > dispatch.end_ns
    assert {"http.request.method", "server.address", "server.port", "url.full"} <= lookup.attributes.keys()
    # The API's server spans by the stable HTTP conventions, and no deprecated name anywhere.
    route = _named(spans, "POST /v1/actions/{operation_id}/presented")[0].attributes
    assert route["http.request.method"] == "POST" and route["http.response.status_code"] == 200
    assert route["http.route"] == "/v1/actions/{operation_id}/presented"
    assert route["url.path"] == f"/v1/actions/{op}/presented" and route["url.scheme"] == "http"
    assert route["client.address"] == "127.0.0.1"
    for span in receiver.spans:
        assert not span.attributes.keys() & DEPRECATED, (span.name, span.attributes)
        assert "(not recorded)" not in span.attributes.values(), (span.name, span.attributes)
    if os.environ.get("SETTLED_TRACE_EXPORT"):  # docs/tracing.md's picture is drawn from this file
        tool_span = tool_spans.get_finished_spans()[0]
        agent = {"service": "the agent", "name": tool_span.name, "span_id": tool_id, "parent_id": None}
        agent |= {"start_ns": tool_span.start_time, "end_ns": tool_span.end_time, "attributes": {}}
        exported = [agent, *(asdict(span) for span in spans)]
        Path(os.environ["SETTLED_TRACE_EXPORT"]).write_text(json.dumps(exported, indent=1))

    # Never a param, a secret, a sentence or a query string, in anything any process exported.
    everything = json.dumps([span.attributes for span in receiver.spans]) + repr(receiver.bodies)
    for forbidden in (ORDER, "31.75", TOKEN, confirmed.say, "wait="):
        assert forbidden not in everything, forbidden


@pytest.fixture
def livekit_spans() -> Iterator[InMemorySpanExporter]:
    """LiveKit's tracer provider for this test only, as an app sets it (`set_tracer_provider`)."""
    pytest.importorskip("livekit.agents", reason="LiveKit Agents is not installed: settled[livekit]")
    from livekit.agents.telemetry import set_tracer_provider
    from livekit.agents.telemetry.traces import tracer as livekit_tracer

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    # LiveKit Agents 1.7 and later record tool arguments unless told not to; earlier ones never do.
    quiet = {"allow_pii": False} if "allow_pii" in inspect.signature(set_tracer_provider).parameters else {}
    set_tracer_provider(provider, **quiet)
    yield spans
    livekit_tracer.set_provider(trace.NoOpTracerProvider())


async def test_livekit_s_tool_call_span_parents_the_action_s_trace(
    traced_stack: Stack, traced_sandbox: Sandbox, receiver: Receiver, livekit_spans: InMemorySpanExporter
) -> None:
    """LiveKit Agents' own tool-call span parents what settled does for the call: the adapter runs
    inside LiveKit's `function_tool` span, and the client carries its context to the API, whose spans
    and the request to the business service join LiveKit's trace (a real `AgentSession`, offline)."""
    from livekit.agents import Agent, AgentSession
    from settled.adapters.livekit import SettledLiveKit

    from examples.livekit_refund import ScriptedLLM

    conversation, order = new_id("conv"), new_id("order")
    params = {"order_id": order, "amount": 12, "currency": "EUR"}
    kinds = load_action_kinds(traced_stack.config, names=["refund"])
    async with SettledClient(traced_stack.api_url) as client:
        bridge = SettledLiveKit(client, conversation, kinds, wait_s=5, authorize_on_call=True)
        session: AgentSession[None] = AgentSession(
            llm=ScriptedLLM(RefundScript(refund=params), call_prefix="c")
        )
        bridge.attach(session)
        await session.start(Agent(instructions="refunds", tools=bridge.tools()))
        await session.run(user_input=f"Please refund order {order}.")
        await session.aclose()
        await bridge.aclose()

    [tool] = [span for span in livekit_spans.get_finished_spans() if span.name == "function_tool"]
    trace_id = format(tool.context.trace_id, "032x")
    tool_id = format(tool.context.span_id, "016x")
    [write] = [
        row
        for row in traced_sandbox.requests(derived_operation_id(conversation, "refund", params))
        if row["op"] == "create"
    ]
    assert write["traceparent"].split("-")[1] == trace_id  # the service joined LiveKit's trace

    def created() -> list:
        return [
            span
            for span in receiver.of_trace(trace_id)
            if span.name.startswith("POST /v1/actions") and span.parent_id == tool_id
        ]

    wait_for(created, timeout_s=30, what="the API's create span under LiveKit's function_tool span")


def _writes(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in requests if r["op"] == "create"]


def test_off_unless_configured_nothing_is_carried(api: httpx.Client, sandbox: Sandbox) -> None:
    """The session's stack has no OTEL_* variables: its requests to the service carry no trace."""
    op = new_id()
    create(api, "refund", REFUND, operation_id=op, authorized=True, wait=5)
    requests = wait_for(lambda: sandbox.requests(op), what="the refund's request")
    assert [r["traceparent"] for r in requests] == [None]


@pytest.fixture
def pipecat_spans() -> Iterator[InMemorySpanExporter]:
    """Pipecat's tracer (`trace.get_tracer("pipecat")`, the global provider) exporting to memory, for
    this test only: the global provider is set for it and put back after, as OpenTelemetry's own
    test utilities do."""
    pytest.importorskip("pipecat", reason="Pipecat is not installed: settled[pipecat]")
    from opentelemetry.util._once import Once

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    previous = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace.set_tracer_provider(provider)
    yield spans
    trace._TRACER_PROVIDER = previous
    trace._TRACER_PROVIDER_SET_ONCE = Once()


async def test_pipecat_s_llm_span_parents_the_tool_call_s_action_trace(
    traced_stack: Stack, traced_sandbox: Sandbox, receiver: Receiver, pipecat_spans: InMemorySpanExporter
) -> None:
    """Pipecat's own LLM span (its `traced_llm`, as its LLM services wear it, on a scripted LLM, in
    a pipeline with Pipecat's tracing on) is current when Pipecat runs the tool call: the API's
    create span is its child, and the request to the business service carries its trace."""
    from pipecat.frames.frames import EndFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.utils.tracing.service_decorators import traced_llm
    from pipecat.workers.runner import WorkerRunner
    from settled.adapters.pipecat import SettledPipecat

    from examples.pipecat_refund import ScriptedLLM, ScriptedTTS, say

    class TracedLLM(ScriptedLLM):
        @traced_llm
        async def _respond(self, context: Any) -> None:
            await super()._respond(context)

    conversation, order = new_id("conv"), new_id("order")
    params = {"order_id": order, "amount": 12, "currency": "EUR"}
    kinds = load_action_kinds(traced_stack.config, names=["refund"])
    async with SettledClient(traced_stack.api_url) as client:
        llm = TracedLLM(RefundScript(refund=params), call_prefix="p")
        bridge = SettledPipecat(client, conversation, kinds, wait_s=5, authorize_on_call=True)
        bridge.register(llm)
        context = LLMContext([{"role": "system", "content": "refunds"}], tools=bridge.tools_schema())
        pair = LLMContextAggregatorPair(context)
        pipeline = Pipeline([pair.user(), llm, ScriptedTTS(), pair.assistant()])
        worker = PipelineWorker(
            pipeline, observers=[bridge.observer()], cancel_on_idle_timeout=False, enable_tracing=True
        )
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        running = asyncio.create_task(runner.run())
        try:
            await say(worker, llm, f"Please refund order {order}.")
            operation_id = derived_operation_id(conversation, "refund", params)
            await client.await_settled(operation_id, timeout_s=30)
        finally:
            await worker.queue_frame(EndFrame())
            await asyncio.wait_for(running, 20)
            await bridge.aclose()

    [write] = [row for row in traced_sandbox.requests(operation_id) if row["op"] == "create"]
    trace_id = write["traceparent"].split("-")[1]
    llm_spans = {
        format(span.context.span_id, "016x")
        for span in pipecat_spans.get_finished_spans()
        if span.name == "llm" and format(span.context.trace_id, "032x") == trace_id
    }
    assert llm_spans, (
        write["traceparent"],
        [(s.name, format(s.context.trace_id, "032x")) for s in pipecat_spans.get_finished_spans()],
    )

    def created() -> list[ReceivedSpan]:
        return [
            span
            for span in receiver.of_trace(trace_id)
            if span.name.startswith("POST /v1/actions") and span.parent_id in llm_spans
        ]

    wait_for(created, timeout_s=30, what="the API's create span under Pipecat's llm span")
