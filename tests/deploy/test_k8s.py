"""deploy/k8s: every overlay renders with `kubectl kustomize` and validates against the Kubernetes
API schemas (kubernetes-validate, strict, offline), and every object is checked against the code
it runs: probes on routes the app serves, ports that match, environment variables that are real
settings, commands that are real `forecast` subcommands with real options, no secret value."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import click
import pytest
import typer
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = ("cpu", "gpu")
KUBERNETES = "1.32.0"  # the API version validated against (kubectl's own here)
PUBLIC = {"/v1/predict", "/v1/model", "/healthz", "/readyz", "/docs", "/docs-assets", "/openapi.json"}
INTERNAL = ("/v1/actuals", "/v1/monitor", "/v1/admin", "/metrics")
PLACEHOLDER = "REPLACE-ME"


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        if os.environ.get("FORECAST_CI"):  # .ci/run: these tests must run there
            raise AssertionError("kubectl is not installed; .ci/run installs it")
        pytest.skip("kubectl (with kustomize) is not installed")
    return found


def rendered(overlay: str) -> list[dict]:
    output = subprocess.run(
        [kubectl(), "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True, check=True
    ).stdout
    return [doc for doc in yaml.safe_load_all(output) if doc]


def objects(overlay: str, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in rendered(overlay) if o["kind"] == kind}


def pod_spec(obj: dict) -> dict:
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


def workloads(overlay: str) -> list[dict]:
    return [o for o in rendered(overlay) if o["kind"] in ("Deployment", "CronJob")]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_and_validates_strictly(overlay):
    import kubernetes_validate

    docs = rendered(overlay)
    assert {o["kind"] for o in docs} >= {"Deployment", "Service", "HorizontalPodAutoscaler",
                                         "PodDisruptionBudget", "Ingress", "NetworkPolicy", "CronJob"}  # fmt: skip
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    for doc in yaml.safe_load_all((K8S / "secrets.example.yaml").read_text()):
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def app_routes() -> set[str]:
    from service.main import create_app
    from service.predict_endpoint import PREDICT_PATH
    from service.settings import ServiceSettings

    app = create_app(ServiceSettings(forecast_log_url="sqlite:///unused.db"))
    return route_paths(app.routes) | {PREDICT_PATH}  # predict is answered before routing


def route_paths(routes: list, prefix: str = "") -> set[str]:
    """Every path the app answers, through included routers (FastAPI keeps them nested)."""
    paths = set()
    for route in routes:
        if hasattr(route, "original_router"):
            paths |= route_paths(route.original_router.routes, prefix + route.include_context.prefix)
        elif hasattr(route, "path"):
            paths.add(prefix + route.path)
    return paths


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_api_probes_ports_and_command_are_the_apps(overlay):
    from tests.deploy.test_compose import load

    api = objects(overlay, "Deployment")["forecast-api"]
    (container,) = pod_spec(api)["containers"]
    routes = app_routes()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check = container[probe]["httpGet"]
        assert check["path"] in routes, (probe, check["path"])
        assert check["port"] in ports
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # neither restarts a replica that waits for a model or for the registry
    assert (
        container["startupProbe"]["httpGet"]["path"]
        == container["livenessProbe"]["httpGet"]["path"]
        == "/healthz"
    )
    assert "replicas" not in api["spec"]  # the autoscaler's: a re-apply must not reset it
    assert container["command"] == load("docker-compose.yml")["services"]["api"]["command"]
    assert ports["http"] == int(container["command"][container["command"].index("--port") + 1])
    service = objects(overlay, "Service")["forecast-api"]
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert service["spec"]["selector"] == api["spec"]["selector"]["matchLabels"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert pod_spec(api)["securityContext"]["runAsNonRoot"]
    assert container["resources"]["requests"] and container["resources"]["limits"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_termination_waits_longer_than_the_service_drains(overlay):
    from monitoring.settings import MonitoringSettings

    api = objects(overlay, "Deployment")["forecast-api"]
    command = pod_spec(api)["containers"][0]["command"]
    graceful = float(command[command.index("--timeout-graceful-shutdown") + 1])
    drain = MonitoringSettings.model_fields["forecast_log_drain_s"].default
    unrouted = pod_spec(api)["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]  # leaving endpoints
    assert unrouted >= 5
    assert pod_spec(api)["terminationGracePeriodSeconds"] > unrouted + graceful + drain


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_pod_mounts_an_api_token_and_only_mlflow_clients_reach_mlflow(overlay):
    """Whoever reaches MLflow can move @champion, and so choose what every replica runs."""
    clients = set()
    for workload in workloads(overlay):
        spec = pod_spec(workload)
        assert spec["automountServiceAccountToken"] is False, workload["metadata"]["name"]
        env = {e["name"] for c in spec["containers"] for e in c.get("env", [])}
        template = (
            workload["spec"]["jobTemplate"]["spec"] if workload["kind"] == "CronJob" else workload["spec"]
        )
        if "MLFLOW_TRACKING_URI" in env:
            assert template["template"]["metadata"]["labels"]["forecast/mlflow-client"] == "true"
            clients.add(workload["metadata"]["name"])
    assert clients == {"forecast-api", "forecast-train", "forecast-sweep", "forecast-retrain"}
    (rule,) = objects(overlay, "NetworkPolicy")["mlflow"]["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"forecast/mlflow-client": "true"}}}]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_ingress_takes_the_bodies_the_service_takes_over_https(overlay):
    from service.settings import ServiceSettings

    ingress = objects(overlay, "Ingress")["forecast-api"]
    limit = ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-body-size"]
    assert (
        limit.endswith("m")
        and int(limit[:-1]) * 2**20 >= ServiceSettings.model_fields["max_body_bytes"].default
    )
    hosts = {rule["host"] for rule in ingress["spec"]["rules"]}
    assert hosts <= {host for tls in ingress["spec"]["tls"] for host in tls["hosts"]}


def test_the_gpu_overlay_asks_for_a_gpu_and_the_cpu_one_does_not():
    gpu = pod_spec(objects("gpu", "Deployment")["forecast-api"])["containers"][0]
    cpu = pod_spec(objects("cpu", "Deployment")["forecast-api"])["containers"][0]
    assert gpu["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "nvidia.com/gpu" not in cpu["resources"]["limits"]
    device = {
        c: next(e["value"] for e in spec["env"] if e["name"] == "DEVICE")
        for c, spec in (("gpu", gpu), ("cpu", cpu))
    }
    assert device == {"gpu": "cuda", "cpu": "cpu"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_autoscaler_and_disruption_budget_target_the_api(overlay):
    api = objects(overlay, "Deployment")["forecast-api"]
    hpa = objects(overlay, "HorizontalPodAutoscaler")["forecast-api"]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "forecast-api",
    }
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    pdb = objects(overlay, "PodDisruptionBudget")["forecast-api"]
    assert pdb["spec"]["selector"]["matchLabels"] == api["spec"]["selector"]["matchLabels"]


def cli_command() -> click.Group:
    from pipelines.cli import app

    return typer.main.get_command(app)


def cli_envvars() -> set[str]:
    """Every environment variable a `forecast` option reads."""
    names = set()
    for command in cli_command().commands.values():
        for param in command.params:
            if param.envvar:
                names |= {param.envvar} if isinstance(param.envvar, str) else set(param.envvar)
    return names


def settings_names() -> set[str]:
    from service.settings import ServiceSettings

    return {name.upper() for name in ServiceSettings.model_fields}


def mlflow_server_envvars() -> set[str]:
    from mlflow.cli import cli

    server = cli.commands["server"]
    return {p.envvar for p in server.params if isinstance(p.envvar, str)} | {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                                             "MLFLOW_S3_ENDPOINT_URL"}  # fmt: skip


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_environment_variable_is_a_real_setting(overlay):
    """The API's are ServiceSettings fields; a `forecast` command's are the settings it reads
    (ServiceSettings/MonitoringSettings), its options' envvars, or the tracking URI; MLflow's are
    `mlflow server`'s own (and boto3's credentials)."""
    ours = settings_names() | cli_envvars() | {"MLFLOW_TRACKING_URI"}
    for workload in workloads(overlay):
        for container in pod_spec(workload)["containers"]:
            names = {e["name"] for e in container.get("env", [])}
            allowed = mlflow_server_envvars() if container["command"][0] == "mlflow" else ours
            assert names <= allowed, (workload["metadata"]["name"], names - allowed)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_jobs_run_real_forecast_subcommands_with_real_options_and_files(overlay):
    group = cli_command()
    checked = 0
    for workload in workloads(overlay):
        for container in pod_spec(workload)["containers"]:
            command = container["command"]
            if command[0] != "forecast":
                continue
            sub = group.commands.get(command[1])
            assert sub is not None, command
            known = {opt for param in sub.params for opt in param.opts + param.secondary_opts}
            for word in command[2:]:
                if word.startswith("--"):
                    assert word in known, (command[1], word)
            if "--config" in command:
                config = command[command.index("--config") + 1]
                assert (REPO / config.removeprefix("/app/")).exists(), config  # the image's /app is the repo
            checked += 1
    assert checked == 3  # trainer, sweep, retrain


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_secret_value_is_in_the_manifests(overlay):
    for doc in rendered(overlay):
        assert doc["kind"] != "Secret", "Secrets are created apart (deploy/k8s/secrets.example.yaml)"
        for workload in [doc] if doc["kind"] in ("Deployment", "Job", "CronJob") else []:
            for container in pod_spec(workload)["containers"]:
                for env in container.get("env", []):
                    if any(word in env["name"] for word in ("KEY", "PASSWORD", "SECRET", "URL", "STORAGE")):
                        if env["name"] in ("MLFLOW_TRACKING_URI",):
                            continue
                        assert "valueFrom" in env, env["name"]  # by reference, never a value
    for doc in yaml.safe_load_all((K8S / "secrets.example.yaml").read_text()):
        assert set(doc["stringData"].values()) == {PLACEHOLDER}, doc["metadata"]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_public_routes_are_reachable_from_outside_the_namespace(overlay):
    ingress = objects(overlay, "Ingress")["forecast-api"]
    paths = {p["path"] for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]}
    assert paths <= PUBLIC, paths - PUBLIC
    for path in paths:
        assert not path.startswith(INTERNAL), path
    prefixes = {
        p["path"]
        for rule in ingress["spec"]["rules"]
        for p in rule["http"]["paths"]
        if p["pathType"] == "Prefix"
    }
    assert all(not internal.startswith(prefix) for prefix in prefixes for internal in INTERNAL)
    routes = app_routes()
    assert {p for p in paths if p != "/docs-assets"} <= routes
    policies = objects(overlay, "NetworkPolicy")
    api_policy = policies["forecast-api"]
    assert api_policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "forecast-api"}
    sources = [source for rule in api_policy["spec"]["ingress"] for source in rule["from"]]
    outside = [s for s in sources if "namespaceSelector" in s]
    assert outside == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
    ]
    assert all(s == {"podSelector": {}} for s in sources if "namespaceSelector" not in s)
    assert "mlflow" in policies
