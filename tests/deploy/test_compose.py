"""docker-compose.yml keeps its promises, read as YAML (no Docker needed): health checks and restart
policies, one image for the API and the worker, the one-shot jobs in order, settled's own search
attributes, retention and dynamic config, required secrets, pinned images, and nothing published
beyond this host's loopback. `make compose-check` validates the same file against the compose schema."""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from settled.cli.main import parser

from settled.runtime import stack
from settled.temporal import visibility

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
COMPOSE: dict[str, Any] = yaml.safe_load(COMPOSE_TEXT)
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
JOBS = {"temporal-schema", "temporal-setup"}
LONG_RUNNING = sorted(set(SERVICES) - JOBS)
ENV_EXAMPLE = (ROOT / "deploy" / "settled.env.example").read_text()
# `${NAME}`, `${NAME:-default}`, `${NAME:?message}`: the variables compose reads from .env or the shell.
INTERPOLATED = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)")


def env(service: str) -> dict[str, str]:
    environment = SERVICES[service].get("environment", {})
    assert isinstance(environment, dict), f"{service}: environment as a mapping, so it can be checked"
    return {name: str(value) for name, value in environment.items()}


def depends_on(service: str) -> dict[str, str]:
    return {name: rule["condition"] for name, rule in SERVICES[service].get("depends_on", {}).items()}


def test_the_services_are_the_documented_ones() -> None:
    assert set(SERVICES) == {
        "postgres",
        "temporal-schema",
        "temporal",
        "temporal-setup",
        "temporal-ui",
        "api",
        "worker",
    }


@pytest.mark.parametrize("service", LONG_RUNNING)
def test_every_long_running_service_has_a_health_check_and_comes_back(service: str) -> None:
    check = SERVICES[service].get("healthcheck", {})
    assert check.get("test") and check["test"] != ["NONE"] and not check.get("disable"), service
    assert SERVICES[service].get("restart") == "unless-stopped", service


@pytest.mark.parametrize("job", sorted(JOBS))
def test_one_shot_jobs_retry_on_failure_only_and_publish_nothing(job: str) -> None:
    assert SERVICES[job].get("restart") == "on-failure"
    assert "ports" not in SERVICES[job]


def test_the_api_and_the_worker_are_one_image_with_two_commands() -> None:
    api, worker = SERVICES["api"], SERVICES["worker"]
    assert api["build"] == worker["build"] and api["image"] == worker["image"]
    assert api["volumes"] == worker["volumes"]
    assert api["command"][:2] == ["settled", "api"] and worker["command"] == ["settled", "worker"]
    # The commands are the CLI's own: a flag it does not know fails here, not in a container.
    assert parser().parse_args(api["command"][1:]).host == "0.0.0.0"
    parser().parse_args(worker["command"][1:])


def test_the_jobs_run_in_order() -> None:
    assert depends_on("temporal-schema") == {"postgres": "service_healthy"}
    assert depends_on("temporal").get("temporal-schema") == "service_completed_successfully"
    assert depends_on("temporal-setup") == {"temporal": "service_healthy"}
    # settled starts on a cluster that has its namespace and search attributes.
    assert depends_on("api") == depends_on("worker") == {"temporal-setup": "service_completed_successfully"}


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_dependency_waits_for_health_or_for_completion(service: str) -> None:
    for dependency, condition in depends_on(service).items():
        wanted = "service_completed_successfully" if dependency in JOBS else "service_healthy"
        assert condition == wanted, f"{service} -> {dependency}"


def test_the_setup_job_registers_exactly_settleds_search_attributes() -> None:
    pairs = [pair.split("=") for pair in env("temporal-setup")["SEARCH_ATTRIBUTES"].split()]
    assert dict(pairs) == visibility.declared() and len(pairs) == len(visibility.declared())
    assert "$SEARCH_ATTRIBUTES" in (ROOT / "deploy" / "temporal" / "setup.sh").read_text()


def test_the_namespace_and_its_retention_are_the_dev_stacks() -> None:
    setup = env("temporal-setup")
    assert setup["NAMESPACE_RETENTION"] == stack.NAMESPACE_RETENTION
    # The job registers the namespace settled and the UI use.
    assert setup["SETTLED_NAMESPACE"] == env("api")["SETTLED_NAMESPACE"] == env("worker")["SETTLED_NAMESPACE"]
    assert env("temporal-ui")["TEMPORAL_DEFAULT_NAMESPACE"] == setup["SETTLED_NAMESPACE"]


def test_the_server_reads_dynamic_config_with_what_the_dev_stack_sets() -> None:
    target = env("temporal")["DYNAMIC_CONFIG_FILE_PATH"]
    assert f"./deploy/temporal/dynamicconfig.yaml:{target}:ro" in SERVICES["temporal"]["volumes"]
    dynamic = yaml.safe_load((ROOT / "deploy" / "temporal" / "dynamicconfig.yaml").read_text())
    for setting in stack.DYNAMIC_CONFIG:
        key, value = setting.split("=")
        assert dynamic[key] == [{"value": yaml.safe_load(value)}], key
    read = dynamic["matching.numTaskqueueReadPartitions"][0]["value"]
    assert read >= dynamic["matching.numTaskqueueWritePartitions"][0]["value"] >= 1


def test_history_shards_are_set_for_production_not_left_at_the_development_default() -> None:
    shards = int(env("temporal")["NUM_HISTORY_SHARDS"])
    assert shards >= 512 and shards & (shards - 1) == 0  # a power of two, as Temporal advises


def test_only_the_api_and_the_ui_are_published_and_only_on_loopback() -> None:
    published = {name: service["ports"] for name, service in SERVICES.items() if service.get("ports")}
    assert published == {"api": ["127.0.0.1:8000:8000"], "temporal-ui": ["127.0.0.1:8080:8080"]}
    api_command = SERVICES["api"]["command"]
    assert api_command[api_command.index("--api-port") + 1] == "8000"


def test_health_checks_ask_the_ports_the_services_listen_on() -> None:
    assert "127.0.0.1:8000/healthz" in " ".join(SERVICES["api"]["healthcheck"]["test"])
    metrics_port = env("worker")["SETTLED_WORKER_METRICS_PORT"]
    assert f"127.0.0.1:{metrics_port}/metrics" in " ".join(SERVICES["worker"]["healthcheck"]["test"])


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_secrets_come_from_the_environment_never_from_the_file(service: str) -> None:
    for name, value in env(service).items():
        if re.search(r"PASSWORD|PWD|_KEYS$", name):
            assert re.fullmatch(r"\$\{[A-Z_]+:[?-][^}]*\}", value), f"{service}: {name} is a literal"


@pytest.mark.parametrize("name", ["POSTGRES_PASSWORD", "SETTLED_API_KEYS", "SETTLED_CONFIG"])
def test_what_has_no_safe_default_is_required_with_a_message(name: str) -> None:
    assert re.search(r"\$\{" + name + r":\?[^}]+\}", COMPOSE_TEXT), name
    assert not re.search(r"\$\{" + name + r"(\}|:-)", COMPOSE_TEXT), f"{name} is optional somewhere"


def test_the_env_example_names_every_variable_and_holds_no_secret() -> None:
    example = dict(
        line.split("=", 1) for line in ENV_EXAMPLE.splitlines() if line and not line.startswith("#")
    )
    assert set(INTERPOLATED.findall(COMPOSE_TEXT)) <= set(example)
    for secret in ("POSTGRES_PASSWORD", "SETTLED_API_KEYS", "SETTLED_ENCRYPTION_KEYS"):
        assert example[secret] == "", secret


def test_settled_containers_get_only_variables_settled_reads() -> None:
    source = "".join(path.read_text() for path in (ROOT / "settled").rglob("*.py"))
    for service in ("api", "worker"):
        for name in env(service):
            assert f'"{name}"' in source, f"{service}: settled never reads {name}"


@pytest.mark.parametrize("service", sorted(name for name in SERVICES if "build" not in SERVICES[name]))
def test_images_are_pinned_to_a_version(service: str) -> None:
    image = SERVICES[service]["image"]
    assert re.fullmatch(r"[a-z0-9/._-]+:\d+\.\d+(\.\d+)?[a-z0-9.-]*", image), image


def test_every_file_mounted_from_the_repository_exists() -> None:
    for service in SERVICES.values():
        for volume in service.get("volumes", []):
            if isinstance(volume, str) and volume.startswith("./"):
                assert (ROOT / volume.split(":")[0]).is_file(), volume


def test_the_image_is_slim_python_311_with_the_server_extra_only_run_as_a_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11[.\d]*-slim", dockerfile, re.M)
    # The server extra's pins from the lock, with their hashes; then the project, resolving nothing.
    assert re.search(
        r"^RUN pip install --require-hashes --no-deps -r requirements-server\.txt$", dockerfile, re.M
    )
    assert re.search(
        r'^RUN pip install --no-deps "\.\[server\]"(\s|$)', dockerfile, re.M
    )  # not test or tools
    # What production never runs is removed from the installed package.
    for tool in ("sandbox", "drill", "soak", "bench"):
        assert f'"$site/settled/{tool}"' in dockerfile
    assert re.search(r"^HEALTHCHECK .*\n.*/healthz", dockerfile, re.M)
    users = re.findall(r"^USER (\S+)", dockerfile, re.M)
    assert users and users[-1] not in ("root", "0")
    # Nothing enters the build context unless named: no .venv, no .env, no local state.
    patterns = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line[:1] not in "#"]
    assert patterns[0] == "*"
