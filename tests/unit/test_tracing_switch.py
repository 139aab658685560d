"""Whether a process traces: OpenTelemetry's own variables decide, off unless they ask."""

import pytest

from settled.runtime.tracing import problem, wanted

ENDPOINT = "http://collector:4318"


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "settled"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{ENDPOINT}/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, False),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, True),
    ],
)
def test_tracing_is_on_only_when_the_variables_ask(environ: dict[str, str], on: bool) -> None:
    assert wanted(environ) is on


@pytest.mark.parametrize(
    ("environ", "refused"),
    [
        ({"OTEL_TRACES_EXPORTER": "console,otlp"}, None),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, None),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
            None,
        ),
        ({"OTEL_TRACES_EXPORTER": "oltp"}, "OTEL_TRACES_EXPORTER=oltp"),
        ({"OTEL_TRACES_EXPORTER": "console,zipkin"}, "not 'zipkin'"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "http/json"),
        # Off, nothing is refused: the variables ask for no traces.
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, None),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"}, None),
        # The console exporter speaks no protocol.
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, None),
    ],
)
def test_an_exporter_or_protocol_settled_does_not_ship_is_named(
    environ: dict[str, str], refused: str | None
) -> None:
    said = problem(environ)
    assert (said is None) if refused is None else (said is not None and refused in said), said
