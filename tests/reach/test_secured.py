"""settled on a secured Temporal: a real nginx terminating TLS in front of the dev server (a private CA
and a server name other than the address's host; mTLS; an API key), reached through Temporal's own
environment configuration. In each, a whole action runs through the API and the worker and is
confirmed by the sandbox's records, and the operators' commands work; each way of getting it wrong
makes the worker (and the API) exit 2 with one line naming the cause and the fix, and no secret.
"""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from settled.runtime.stack import Child, Stack, free_port, wait_until
from tests.helpers import REFUND, create, new_id, sandbox_of, wait_for
from tests.reach.proxy import SERVER_NAME, Certificates, Proxy, make_certificates, start_proxy

API_KEY = "tk-" + "9f3c" * 20  # long, as Temporal Cloud's keys are (the proxy's map needs room)
WRONG_KEY = "tk-" + "0bad" * 20


@dataclass
class Secured:
    stack: Stack
    certs: Certificates
    proxy: Proxy

    def env(self, door: str | None, **variables: str) -> dict[str, str]:
        """The stack's environment without its own way to Temporal, then Temporal's variables."""
        env = self.stack.env()
        for name in ("SETTLED_TEMPORAL_ADDRESS", "TEMPORAL_CONFIG_FILE"):
            env.pop(name)
        if door is not None:
            env["TEMPORAL_ADDRESS"] = self.proxy.address(door)
        return {**env, **variables}

    def trusted(self, door: str, **variables: str) -> dict[str, str]:
        """TLS with the private CA and the name on the server's certificate."""
        return self.env(
            door,
            TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(self.certs.ca),
            TEMPORAL_TLS_SERVER_NAME=SERVER_NAME,
            **variables,
        )

    def mtls(self, name: str = "client") -> dict[str, str]:
        return self.trusted(
            "mtls",
            TEMPORAL_TLS_CLIENT_CERT_PATH=str(self.certs.cert(name)),
            TEMPORAL_TLS_CLIENT_KEY_PATH=str(self.certs.key(name)),
        )


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    folder = tmp_path_factory.mktemp("secured")
    stack = Stack.on_free_ports(folder / "stack", ui=False)
    try:
        stack.start_server()
        stack.start_sandbox()
        certs = make_certificates(folder / "certs")
        proxy = start_proxy(folder / "nginx", stack.ports.temporal, certs, API_KEY)
        try:
            yield Secured(stack, certs, proxy)
        finally:
            proxy.stop()
    finally:
        stack.stop()


def settled(env: dict[str, str], *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "settled", *args], env=env, capture_output=True, text=True, timeout=timeout_s
    )


@pytest.fixture
def parts(secured: Secured, tmp_path: Path) -> Iterator["Parts"]:
    started = Parts(secured, tmp_path)
    try:
        yield started
    finally:
        started.stop()


class Parts:
    """A worker and an API on an environment of the test's choosing."""

    def __init__(self, secured: Secured, folder: Path) -> None:
        self.secured = secured
        self.folder = folder
        self.children: list[Child] = []
        self.api_url = ""

    def start(self, worker_env: dict[str, str], api_env: dict[str, str]) -> httpx.Client:
        worker = Child(
            "worker", [sys.executable, "-m", "settled", "worker"], worker_env, self.folder / "w.log"
        )
        self.children.append(worker.start())
        port = free_port()
        argv = [sys.executable, "-m", "settled", "api", "--api-port", str(port)]
        api = Child("api", argv, api_env, self.folder / "api.log")
        self.children.append(api.start())
        self.api_url = f"http://127.0.0.1:{port}"
        wait_until(
            lambda: httpx.get(f"{self.api_url}/healthz", timeout=2).status_code == 200,
            60,
            "the API",
            api,
            also=[worker],
        )
        return httpx.Client(base_url=self.api_url, timeout=30)

    def stop(self) -> None:
        for child in self.children:
            child.stop()


def _confirmed_through(api: httpx.Client, secured: Secured) -> str:
    """A refund created through the API, confirmed, and written once by the sandbox's own records."""
    operation_id = new_id()
    response = create(api, "refund", REFUND, operation_id=operation_id, authorized=True, wait=10)
    assert response.status_code in (200, 201), response.text
    assert response.json()["state"] == "confirmed", response.text
    with sandbox_of(secured.stack) as sandbox:
        records = sandbox.records(operation_id, "refunds") or sandbox.records(
            response.json()["business_ref"] or operation_id
        )
        writes = sandbox.writes(operation_id)
    assert len(writes) == 1 and len(records) >= 1, (writes, records)
    return operation_id


def _operators_work(env: dict[str, str], operation_id: str) -> None:
    shown = settled(env, "status", operation_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["state"] == "confirmed"
    listed = settled(env, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert operation_id in {row["operation_id"] for row in json.loads(listed.stdout)}
    doctor = settled(env, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout
    assert json.loads(doctor.stdout)["ok"] is True


def test_tls_with_a_private_ca_and_a_server_name_override_runs_a_whole_action(
    secured: Secured, parts: Parts
) -> None:
    env = secured.trusted("tls")
    with parts.start(env, env) as api:
        operation_id = _confirmed_through(api, secured)
    _operators_work(env, operation_id)


def test_mtls_runs_a_whole_action(secured: Secured, parts: Parts) -> None:
    env = secured.mtls()
    with parts.start(env, env) as api:
        operation_id = _confirmed_through(api, secured)
    _operators_work(env, operation_id)


def test_an_api_key_runs_a_whole_action_and_a_rotated_key_file_needs_no_restart(
    secured: Secured, parts: Parts, tmp_path: Path
) -> None:
    key_file = tmp_path / "temporal-api-key"
    key_file.write_text(API_KEY + "\n")
    worker_env = secured.trusted("api_key", TEMPORAL_API_KEY=API_KEY)
    api_env = secured.trusted("api_key", SETTLED_TEMPORAL_API_KEY_FILE=str(key_file))
    with parts.start(worker_env, api_env) as api:
        operation_id = _confirmed_through(api, secured)
        # A key the server refuses, written into the file: the running API takes it, and says so.
        key_file.write_text(WRONG_KEY)
        refused = wait_for(
            lambda: (answer := api.get("/healthz")).status_code == 503 and answer.json(),
            what="the API to carry the rotated (wrong) key",
        )
        assert "UNAUTHENTICATED" in refused["detail"] and WRONG_KEY not in json.dumps(refused)
        key_file.write_text(API_KEY)
        wait_for(lambda: api.get("/healthz").status_code == 200, what="the right key again")
        _confirmed_through(api, secured)
    _operators_work(worker_env, operation_id)


def _refused(result: subprocess.CompletedProcess[str], *words: str, secrets: tuple[str, ...] = ()) -> str:
    said = result.stdout + result.stderr
    assert result.returncode == 2, said
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, said  # one line, no traceback
    assert "Traceback" not in said
    for word in words:
        assert word in lines[0], lines[0]
    for secret in secrets:
        assert secret not in said
    return lines[0]


def _private_key(certs: Certificates, name: str) -> str:
    """The base64 body of a private key: no part of it may ever be printed."""
    body = [line for line in certs.key(name).read_text().splitlines() if not line.startswith("-----")]
    return "".join(body)[8:40]


def test_a_wrong_api_key_is_refused_by_the_worker_and_the_api_naming_the_setting(secured: Secured) -> None:
    env = secured.trusted("api_key", TEMPORAL_API_KEY=WRONG_KEY)
    for part in (["worker"], ["api", "--api-port", str(free_port())]):
        _refused(
            settled(env, *part), "refused the credentials", "UNAUTHENTICATED", "TEMPORAL_API_KEY",
            secrets=(WRONG_KEY, API_KEY),
        )  # fmt: skip


def test_no_client_certificate_is_refused(secured: Secured) -> None:
    _refused(
        settled(secured.trusted("mtls"), "worker"),
        "refused the credentials",
        "client certificate: NONE",
        "no credentials were offered",
    )


def test_a_client_certificate_the_server_does_not_trust_is_refused(secured: Secured) -> None:
    _refused(
        settled(secured.mtls("stranger"), "worker"),
        "refused the credentials",
        "FAILED",
        "TEMPORAL_TLS_CLIENT_CERT_PATH",
        secrets=(_private_key(secured.certs, "stranger"),),
    )


def test_a_server_certificate_the_client_does_not_trust_is_refused(secured: Secured) -> None:
    env = secured.env("tls", TEMPORAL_TLS="true", TEMPORAL_TLS_SERVER_NAME=SERVER_NAME)
    _refused(
        settled(env, "worker"), "not signed by a CA this client trusts", "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
    )


def test_a_wrong_server_name_is_refused_naming_only_the_names_the_certificate_holds(secured: Secured) -> None:
    env = secured.env("tls", TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(secured.certs.ca))
    line = _refused(
        settled(env, "worker"), f"holds only {SERVER_NAME}", "not 127.0.0.1", "TEMPORAL_TLS_SERVER_NAME"
    )
    env["TEMPORAL_TLS_SERVER_NAME"] = "wrong.name"
    line = _refused(
        settled(env, "worker"),
        f"holds only {SERVER_NAME}, not wrong.name",
        f"TEMPORAL_TLS_SERVER_NAME to {SERVER_NAME}",
    )
    assert "valid for wrong.name" not in line and "wrong.name, " not in line


def test_a_plaintext_client_at_a_tls_port_is_told_the_port_expects_tls(secured: Secured) -> None:
    _refused(settled(secured.env("tls"), "worker"), "expects TLS", "TEMPORAL_TLS=true")


def test_a_port_that_answers_http1_is_told_so_with_and_without_tls(secured: Secured) -> None:
    """A web server's port (nginx's plain HTTP here) is neither "probably TLS" nor "not TLS": it
    answers HTTP/1, and the fix is the gRPC frontend's address."""
    for env in (secured.env("http"), secured.env("http", TEMPORAL_TLS="true")):
        line = _refused(settled(env, "worker"), "answers HTTP/1", "not gRPC", "TEMPORAL_ADDRESS")
        assert "TLS" not in line, line


def test_a_tls_client_at_a_plaintext_grpc_port_is_told_it_speaks_plaintext(secured: Secured) -> None:
    env = secured.env(None, TEMPORAL_ADDRESS=secured.stack.temporal_address, TEMPORAL_API_KEY=API_KEY)
    _refused(
        settled(env, "worker"), "speaks plaintext gRPC, not TLS", "TEMPORAL_TLS=false", secrets=(API_KEY,)
    )


def test_rustls_words_are_translated(secured: Secured) -> None:
    """A client key that is not the certificate's, and a server certificate of X.509 version 1: the
    cause in an operator's words, never rustls's own (InconsistentKeys, UnsupportedCertVersion)."""
    env = secured.mtls()
    env["TEMPORAL_TLS_CLIENT_KEY_PATH"] = str(secured.certs.key("stranger"))
    line = _refused(
        settled(env, "worker"), "the client key does not match the client certificate",
        "TEMPORAL_TLS_CLIENT_KEY_PATH", secrets=(_private_key(secured.certs, "stranger"),),
    )  # fmt: skip
    assert "InconsistentKeys" not in line and "KeyMismatch" not in line
    line = _refused(settled(secured.trusted("v1"), "worker"), "X.509 version 1", "reissue it as version 3")
    assert "UnsupportedCertVersion" not in line


def test_a_ca_file_that_is_not_pem_is_told_so(secured: Secured, tmp_path: Path) -> None:
    der = tmp_path / "ca.der"
    subprocess.run(
        ["openssl", "x509", "-in", str(secured.certs.ca), "-outform", "DER", "-out", str(der)], check=True
    )
    env = secured.env("tls", TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(der), TEMPORAL_TLS_SERVER_NAME=SERVER_NAME)
    line = _refused(settled(env, "worker"), "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "is not PEM", str(der))
    assert "not signed" not in line and "trust" not in line


def test_an_unknown_profile_lists_the_profiles_the_file_has(secured: Secured, tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text('[profile.staging]\naddress = "127.0.0.1:1"\n[profile.prod]\nnamespace = "p"\n')
    env = secured.env(None, TEMPORAL_CONFIG_FILE=str(config), TEMPORAL_PROFILE="production")
    _refused(settled(env, "worker"), "TEMPORAL_PROFILE=production", "'prod', 'staging'", str(config))


def test_credentials_an_operator_command_offers_and_the_server_refuses_are_temporal_refused(
    secured: Secured,
) -> None:
    env = secured.trusted("api_key", TEMPORAL_API_KEY=WRONG_KEY)
    result = settled(env, "status", "no-such-action")
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("settled: temporal_refused: "), result.stderr
    assert "UNAUTHENTICATED" in result.stderr and WRONG_KEY not in result.stderr + result.stdout


def test_disabled_host_verification_reaches_a_server_whose_certificate_names_another_host(
    secured: Secured,
) -> None:
    """The certificate holds temporal.internal, the address is 127.0.0.1, no server name is set: with
    TEMPORAL_TLS_DISABLE_HOST_VERIFICATION the name is not checked (the CA still is)."""
    env = secured.env("tls", TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(secured.certs.ca))
    refused = settled(env, "status", "no-such-action")
    assert f"holds only {SERVER_NAME}" in refused.stderr, refused.stderr
    env["TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"] = "TRUE"
    result = settled(env, "status", "no-such-action")
    assert result.returncode == 1 and result.stderr.startswith("settled: not_found: "), result.stderr
    # The chain still counts: another CA's certificate is refused even so.
    env["TEMPORAL_TLS_SERVER_CA_CERT_PATH"] = str(secured.certs.other_ca)
    result = settled(env, "status", "no-such-action")
    assert "not signed by a CA this client trusts" in result.stderr, result.stderr


def test_nothing_at_the_address_is_one_line_not_a_traceback(secured: Secured) -> None:
    env = secured.env(None, SETTLED_TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}")
    _refused(settled(env, "worker"), "nothing answers", "connection refused")


def test_a_namespace_that_does_not_exist_is_refused_with_the_commands_that_create_it(
    secured: Secured,
) -> None:
    env = secured.trusted("tls", SETTLED_NAMESPACE="nowhere")
    line = _refused(
        settled(env, "worker"),
        "namespace 'nowhere' does not exist",
        "temporal operator namespace create --namespace nowhere",
        "tcld namespace create --namespace nowhere",
    )
    assert "Traceback" not in line
    doctor = settled(env, "doctor")
    assert doctor.returncode == 1 and "FAILED" in doctor.stdout and "namespace" in doctor.stdout


def test_a_shells_temporal_environment_does_not_throw_off_the_dev_stack(secured: Secured) -> None:
    """`settled dev`'s parts reach its own dev server even with TEMPORAL_* set for another cluster:
    the stack's environment drops them (a TEMPORAL_API_KEY would otherwise turn on TLS toward it)."""
    polluted = {"TEMPORAL_API_KEY": WRONG_KEY, "TEMPORAL_ADDRESS": "elsewhere.tmprl.cloud:7233"}
    previous = {name: os.environ.get(name) for name in polluted}
    os.environ.update(polluted)
    try:
        env = secured.stack.env()
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value
    assert not any(name.startswith("TEMPORAL_") and name != "TEMPORAL_CONFIG_FILE" for name in env)
    doctor = settled(env, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout
    report = json.loads(doctor.stdout)
    assert report["temporal"]["tls"] is False and report["temporal"]["api_key"] is None
