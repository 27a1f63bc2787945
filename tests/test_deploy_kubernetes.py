"""The Kubernetes manifests (deploy/kubernetes): rendered with kustomize, every object
validated offline against the Kubernetes API schemas (``kubernetes-validate``, strict: an
unknown field is an error), and what ties them together checked: the volumes the
controller's and agents' flags name are mounted, the Secrets they mount are the generated
ones, the agents' controller address is the Service's, the probes speak gRPC to the port
the controller listens on, the flags parse with this package's command line, and the GPU
overlay gives the agents the node's GPUs.

Plausible bugs this catches: a flag renamed in the package but not in the manifests, a
mount path that drifted from a flag, a Secret referenced by its base name after kustomize
suffixed it, a misspelt field (``readinessProbe.grcp``), the Service renamed without the
agents' address."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mlsched.cli import get_args_parser

ROOT = Path(__file__).resolve().parent.parent
KUBE = ROOT / "deploy" / "kubernetes"
#: The Kubernetes release the manifests are checked against (their API versions are GA).
K8S_VERSION = "1.32.0"

kubectl = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    kubectl is None, reason="kubectl (its built-in kustomize renders the manifests) not found"
)


def _render(tmp: Path, target: str) -> list[dict[str, Any]]:
    tree = tmp / "kubernetes"
    if not tree.exists():
        shutil.copytree(KUBE, tree)
        for name in ("token", "agent-secret"):  # what an operator makes first
            path = tree / "base" / "secrets" / name
            path.write_text(f"{name}-value\n")
            path.chmod(0o600)
    assert kubectl is not None
    out = subprocess.run(
        [kubectl, "kustomize", str(tree / target)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} objects of kind {kind}"
    return found[0]


def _flags(args: list[str], values: dict[str, str]) -> dict[str, str]:
    out = {}
    for arg in args[1:]:
        flag, _, value = arg.partition("=")
        for name, real in values.items():
            value = value.replace(f"$({name})", real)
        out[flag] = value
    return out


@pytest.mark.parametrize("target", ["base", "overlays/gpu"])
def test_the_manifests_render_validate_and_hold_together(tmp_path: Path, target: str) -> None:
    import kubernetes_validate

    docs = _render(tmp_path, target)
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD's kind: not in the core schemas (checked below)
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    secrets = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    service = _one(docs, "Service")
    controller = _one(docs, "StatefulSet")
    agents = _one(docs, "DaemonSet")
    namespace = _one(docs, "Namespace")["metadata"]["name"]
    assert all(d["metadata"].get("namespace", namespace) == namespace for d in docs)

    pod = controller["spec"]["template"]["spec"]
    (ctl,) = pod["containers"]
    flags = _flags(ctl["args"], {})
    mounts = {m["mountPath"]: m["name"] for m in ctl["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    claims = {c["metadata"]["name"] for c in controller["spec"]["volumeClaimTemplates"]}
    for flag in ("--token-file", "--agent-secret-file"):
        mount = str(Path(flags[flag]).parent)
        assert mount in mounts, f"{flag} {flags[flag]} is on no mounted volume"
        assert volumes[mounts[mount]]["secret"]["secretName"] in secrets
    users = volumes[mounts[str(Path(flags["--users-file"]).parent)]]["configMap"]["name"]
    (users_map,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == users]
    from mlsched.net.users import parse_users

    parse_users(yaml.safe_load(users_map["data"]["users.yaml"]), "users.yaml")  # it loads
    assert mounts[str(Path(flags["--db"]).parent)] in claims  # the state file persists
    assert flags["--checkpoint-root"] in mounts
    port = int(flags["--listen"].rpartition(":")[2])
    by_name = {p["name"]: p["containerPort"] for p in ctl["ports"]}
    assert by_name["grpc"] == port
    assert by_name["metrics"] == int(flags["--metrics-listen"].rpartition(":")[2])
    for probe in ("readinessProbe", "livenessProbe"):
        assert ctl[probe]["grpc"]["port"] == port
    get_args_parser().parse_args(ctl["args"])  # every flag is one the controller has
    assert pod["securityContext"]["runAsNonRoot"] is True

    apod = agents["spec"]["template"]["spec"]
    (agent,) = apod["containers"]
    assert apod["hostNetwork"] is True
    env = {e["name"]: e.get("value") for e in agent["env"]}
    host, _, aport = env["MLSCHED_CONTROLLER"].rpartition(":")
    assert host.split(".")[:2] == [service["metadata"]["name"], namespace]
    assert int(aport) in {p["port"] for p in service["spec"]["ports"]}
    aflags = _flags(agent["args"], {"NODE_NAME": "gpu-a", "NODE_IP": "10.0.0.12"})
    amounts = {m["mountPath"] for m in agent["volumeMounts"]}
    assert str(Path(env["MLSCHED_TOKEN_FILE"]).parent) in amounts
    assert aflags["--checkpoint-root"] == flags["--checkpoint-root"] in amounts
    avolumes = {v["name"]: v for v in apod["volumes"]}
    amount = {m["mountPath"]: m["name"] for m in agent["volumeMounts"]}
    claim = volumes[mounts[flags["--checkpoint-root"]]]["persistentVolumeClaim"]["claimName"]
    ckpt = avolumes[amount[aflags["--checkpoint-root"]]]
    assert ckpt["persistentVolumeClaim"]["claimName"] == claim  # one shared volume
    get_args_parser().parse_args([*agent["args"][:1], *(f"{k}={v}" for k, v in aflags.items())])

    monitor = _one(docs, "ServiceMonitor")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {
        p["name"] for p in service["spec"]["ports"]
    }

    gpus = agent.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
    if target == "overlays/gpu":
        assert gpus and int(gpus) > 0
        assert agent["image"].endswith("-cuda")
    else:
        assert gpus is None
