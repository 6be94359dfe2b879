"""docker-compose.yml against the Compose schema, and the topology docs/scaling.md promises.
(No Docker engine runs here; tests/deploy/test_stack.py runs the same topology as processes.)"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCHEMA = Path(__file__).with_name("compose-spec.json")
SCHEMA_SHA256 = "d549057ebc2925f39f62799eab0db7b9e2c18b35b6c00595199116da3ed10e64"


class ComposeLoader(yaml.SafeLoader):
    """Compose's own YAML tags (!reset, !override) parse to their plain values."""


for tag in ("!reset", "!override"):
    ComposeLoader.add_constructor(
        tag,
        lambda loader, node: (
            loader.construct_mapping(node)
            if isinstance(node, yaml.MappingNode)
            else loader.construct_sequence(node)
            if isinstance(node, yaml.SequenceNode)
            else loader.construct_scalar(node)
        ),
    )


def load(name: str) -> dict:
    return yaml.load((REPO / name).read_text(), Loader=ComposeLoader)


@pytest.fixture(scope="module")
def compose() -> dict:
    return load("docker-compose.yml")


def test_vendored_schema_is_the_pinned_one():
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.cpu.yml"])
def test_compose_files_validate_against_the_compose_schema(name):
    jsonschema.validate(load(name), json.loads(SCHEMA.read_text()))


def test_services_and_their_roles(compose):
    services = compose["services"]
    assert set(services) >= {"postgres", "minio", "minio-init", "mlflow", "trainer", "api", "proxy"}
    mlflow = " ".join(services["mlflow"]["command"])
    assert "--backend-store-uri postgresql://" in mlflow
    assert "--artifacts-destination s3://" in mlflow and "--serve-artifacts" in mlflow
    assert "--allowed-hosts mlflow:5000" in mlflow  # the API and trainer call it as mlflow:5000
    assert services["mlflow"]["environment"]["MLFLOW_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert services["trainer"]["profiles"] == ["train"]
    assert services["trainer"]["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert " ".join(services["trainer"]["command"]).startswith("forecast train --config")
    api = services["api"]
    assert api["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert api["environment"]["MODEL_URI"].endswith("@champion")
    assert api["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert "ports" not in api, "replicas must not fight over a host port; the proxy publishes it"
    assert "postgres-data:/var/lib/postgresql/data" in services["postgres"]["volumes"]


def test_cpu_override_drops_the_gpu_reservation():
    override = load("docker-compose.cpu.yml")["services"]["api"]
    assert override["deploy"] == {} and override["environment"]["DEVICE"] == "cpu"
    assert "!reset" in (REPO / "docker-compose.cpu.yml").read_text()


def test_ports_health_checks_and_dependencies(compose):
    services = compose["services"]
    published = {name: s.get("ports", []) for name, s in services.items()}
    assert any(p.endswith(":5000") for p in published["mlflow"])
    assert any(p.endswith(":8000") for p in published["proxy"])
    one_shot = {"minio-init", "trainer"}
    for name, service in services.items():
        if name not in one_shot:
            assert "healthcheck" in service, f"{name} has no health check"
        for dependency, condition in service.get("depends_on", {}).items():
            assert dependency in services
            expected = "service_completed_successfully" if dependency in one_shot else "service_healthy"
            assert condition["condition"] == expected, (name, dependency)


def test_no_secrets_in_the_compose_file(compose):
    text = (REPO / "docker-compose.yml").read_text()
    assert re.search(r"PASSWORD:\s*\$\{\w+:\?", text), "passwords must come from .env"
    for name, service in compose["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if "PASSWORD" in key or "SECRET" in key or key == "API_KEY":
                assert str(value).startswith("${"), f"{name}.{key} is hard-coded"
    example = (REPO / ".env.example").read_text()
    for variable in set(re.findall(r"\$\{(\w+)", text)) - {"TORCH_INDEX_URL"}:
        assert f"{variable}=" in example, f"{variable} missing from .env.example"


def test_image_installs_like_readme_and_runs_as_non_root():
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "torch==2.13.0" in dockerfile and 'pip install -c requirements.lock ".[s3]"' in dockerfile
    assert re.search(r"^COPY .*requirements\.lock", dockerfile, flags=re.M)  # the lock is in the image
    users = re.findall(r"^USER\s+(\S+)", dockerfile, flags=re.M)
    assert users and users[-1] not in {"root", "0"}
    # every package pyproject installs is in the image (a package left out installs nothing)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {name.rstrip("*") for name in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, flags=re.M))
    assert packages <= copied, f"the Dockerfile does not copy {sorted(packages - copied)}"


def test_the_api_has_time_to_drain_the_forecast_log_before_it_is_killed(compose):
    """uvicorn's graceful shutdown, then the log writer's drain budget, within the stop grace."""
    from monitoring.settings import MonitoringSettings

    api = compose["services"]["api"]
    graceful = float(api["command"][api["command"].index("--timeout-graceful-shutdown") + 1])
    drain = MonitoringSettings.model_fields["forecast_log_drain_s"].default
    grace = float(api["stop_grace_period"].removesuffix("s"))
    assert graceful + drain < grace


def test_docs_mention_only_services_that_exist(compose):
    section = (REPO / "docs" / "scaling.md").read_text()  # README's Scaling out section moved there
    mentioned = set(re.findall(r"docker compose[^\n`]*?(?:--scale |run --rm |up -d )(\w[\w-]*)", section))
    mentioned |= set(re.findall(r"--scale (\w+)=", section))
    assert mentioned, "docs/scaling.md shows no compose commands"
    assert mentioned <= set(compose["services"]) | {"--build"}, mentioned - set(compose["services"])


def nginx_conf() -> str:
    """deploy/nginx.conf without its comments."""
    return re.sub(r"#[^\n]*", "", (REPO / "deploy" / "nginx.conf").read_text())


def nginx_size(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kKmMgG]?)", value).groups()
    return int(number) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit.lower()]


@pytest.mark.parametrize(
    ("modifier", "path"),
    [("^~", "/v1/admin/"), ("=", "/metrics"), ("^~", "/v1/actuals"), ("^~", "/v1/monitor")],
    ids=["admin", "metrics", "actuals", "monitor"],
)
def test_proxy_does_not_publish_admin_monitoring_or_metrics(modifier, path):
    conf = nginx_conf()
    block = re.search(rf"location\s+{re.escape(modifier)}\s+{re.escape(path)}\s*\{{(?P<body>[^}}]*)\}}", conf)
    assert block, f"deploy/nginx.conf has no `location {modifier} {path}` block"
    assert re.fullmatch(r"\s*return\s+404\s*;\s*", block["body"]), block["body"]


def test_proxy_body_limit_is_within_the_service_limit():
    from service.settings import ServiceSettings

    service_limit = ServiceSettings.model_fields["max_body_bytes"].default  # MAX_BODY_BYTES unset
    sizes = re.findall(r"client_max_body_size\s+(\w+)\s*;", nginx_conf())
    assert sizes, "set client_max_body_size in deploy/nginx.conf (nginx's own default is 1m)"
    for size in sizes:
        assert 0 < nginx_size(size) <= service_limit, (size, service_limit)
