"""The deploy kit (deploy/, docs/deploy.md) holds together: the Kubernetes
manifests pass Kubernetes' own schemas, every leaseq option in them parses as
the CLI parses it, the probes and the autoscaler name what the worker and the
dashboard serve, the stop timeouts are longer than the worker's grace, and the
Grafana dashboard asks only for metrics leaseq exports.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import click
import kubernetes_validate
import msgspec
import pytest
import yaml

from leaseq.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = "1.30.0"
"""The Kubernetes version the manifests are checked against (kubernetes-validate
ships its schemas: no cluster, no network)."""


def _docs(name: str) -> dict[str, dict[str, Any]]:
    """The objects of deploy/kubernetes/<name>, by kind/name."""
    docs = yaml.safe_load_all((DEPLOY / "kubernetes" / name).read_text())
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _parsed(args: list[str]) -> dict[str, Any]:
    """The options of ``leaseq <args>`` as the CLI parses them (nothing runs);
    an unknown option or a bad value raises click's UsageError."""
    group = click.Context(cli, info_name="leaseq")
    command = cli.get_command(group, args[0])
    assert command is not None, f"leaseq has no command {args[0]!r}"
    return command.make_context(args[0], list(args[1:]), parent=group).params


@pytest.mark.parametrize("name", ["worker.yaml", "web.yaml"])
def test_the_manifests_pass_the_kubernetes_schemas(name: str) -> None:
    for doc in _docs(name).values():
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_the_worker_deployment_fits_the_worker() -> None:
    deployment = _docs("worker.yaml")["Deployment/leaseq-worker"]
    container = _container(deployment)
    options = _parsed(container["args"])
    assert options["metrics_host"] == "0.0.0.0"  # the kubelet and Prometheus reach it
    (port,) = container["ports"]
    assert options["metrics_port"] == port["containerPort"]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"] == {"path": path, "port": port["name"]}
    # The SIGKILL comes after the worker's grace and its last writes, not during them.
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace >= options["grace"] + 10
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(options["metrics_port"])


def test_keda_scales_the_worker_on_the_dashboards_backlog_of_its_queue() -> None:
    keda, web = _docs("keda.yaml"), _docs("web.yaml")
    worker = _docs("worker.yaml")["Deployment/leaseq-worker"]
    scaled = keda["ScaledObject/leaseq-worker"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "metrics-api"
    meta = trigger["metadata"]
    # The URL is the web Service's, the path the dashboard's scale route for the
    # queue the worker serves, the value a key of that route's JSON.
    service = web["Service/leaseq-web"]
    (service_port,) = service["spec"]["ports"]
    url = f"http://{service['metadata']['name']}:{service_port['port']}/api/scale/"
    queue = _container(worker)["args"][1]
    assert meta["url"] == url + queue
    from leaseq.observe.endpoint import scale_doc
    from leaseq.types import Stats

    stats = Stats(queue=queue, pending=3, scheduled=0, active=1, succeeded=0, dead=0,
                  cancelled=0, expired=0, expiring_soon=0, oldest_pending_age=None,
                  next_due_in=None, server_time=0.0, overdue=2)  # fmt: skip
    # Running jobs count (no scale-in under them); a paused queue's waiting ones do not.
    assert scale_doc(stats)[meta["valueLocation"]] == 1 + 3 + 2
    paused = msgspec.structs.replace(stats, paused=True)
    assert scale_doc(paused)[meta["valueLocation"]] == 1
    # One worker per --concurrency jobs.
    concurrency = _parsed(_container(worker)["args"])["concurrency"]
    assert float(meta["targetValue"]) == concurrency
    # Bearer auth with the token the dashboard is given.
    auth = keda["TriggerAuthentication/" + trigger["authenticationRef"]["name"]]
    (ref,) = auth["spec"]["secretTargetRef"]
    assert meta["authMode"] == "bearer" and ref["parameter"] == "token"
    web_env = {e["name"]: e for e in _container(web["Deployment/leaseq-web"])["env"]}
    secret = web_env["LEASEQ_WEB_AUTH"]["valueFrom"]["secretKeyRef"]
    assert (ref["name"], ref["key"]) == (secret["name"], secret["key"])
    web_args = _parsed(_container(web["Deployment/leaseq-web"])["args"])
    assert web_args["host"] == "0.0.0.0" and web_args["port"] == service_port["port"]


def test_the_systemd_unit_stops_after_the_workers_grace() -> None:
    text = (DEPLOY / "systemd" / "leaseq-worker@.service").read_text()
    fields = dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and line[0] != "#"
    )
    command = shlex.split(fields["ExecStart"])
    assert command[:3] == ["/opt/leaseq/bin/leaseq", "worker", "%i"]
    args = [a for a in command[3:] if not a.startswith("$")]
    grace = float(args[args.index("--grace") + 1])
    assert int(fields["TimeoutStopSec"]) >= grace + 10
    assert fields["KillSignal"] == "SIGTERM" and fields["Restart"] == "on-failure"


def test_the_image_recipe_copies_what_exists_and_installs_a_real_extra() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    for line in text.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"Dockerfile copies a missing {source}"
    extras = re.findall(r"'\.\[(\w+)\]'", text)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert extras and all(f"\n{extra} = [" in pyproject for extra in extras)
    assert "USER leaseq" in text and 'ENTRYPOINT ["leaseq"]' in text


def test_the_grafana_dashboard_asks_only_for_metrics_leaseq_exports() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "leaseq.json").read_text())
    exported = _exported()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            names = set(re.findall(r"\bleaseq_[a-z_]+", target["expr"]))
            assert names and names <= exported, (panel["title"], names - exported)


def _exported() -> set[str]:
    """Every metric name leaseq exports (queue figures and worker figures), as
    Prometheus sees them (counters with _total, histograms with _bucket)."""
    from prometheus_client import CollectorRegistry, generate_latest

    from leaseq.observe.metrics import render
    from leaseq.observe.worker_metrics import WorkerMetrics
    from leaseq.types import Stats

    stats = Stats(queue="q", pending=0, scheduled=0, active=0, succeeded=0, dead=0,
                  cancelled=0, expired=0, expiring_soon=0, oldest_pending_age=None,
                  next_due_in=None, server_time=0.0)  # fmt: skip
    worker = WorkerMetrics()
    worker.slots("q", 1)
    worker.finished("q", "complete", 0.1)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(worker)
    text = render([stats]).decode() + generate_latest(registry).decode()
    return {line.split("{")[0].split()[0] for line in text.splitlines() if line[:1] != "#"}
