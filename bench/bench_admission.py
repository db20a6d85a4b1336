"""Admission throughput and server-side latency against the bare-ASGI floor (DESIGN.md section 10).

Runs, side by side in one run on this machine:
- the floor: ``bench/bare_app.py`` (a fixed AdmissionReview answer) on uvicorn with the same TLS;
- catalog-warden: ``catalog-warden serve --state DIR`` with 10,000 objects of each guarded kind,
  answering a Release CREATE that binds to a red ComponentVersion (a view lookup and a denial).

Load comes from ``wrk`` (Debian package ``wrk``) with one thread, at 1, 16, 64 and 256
connections in flight. Server-side latency is read from the server's own JSON log lines
(``duration_ms``: parse to answer, excluding TLS and HTTP framing) at 64 in flight.

    python bench/bench_admission.py [--seconds 5] [--objects 10000]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.server import free_port, wait_until  # noqa: E402
from webhook.certs import write_dev_certs  # noqa: E402

KINDS = {
    "solar.opendefense.cloud/v1alpha1": [
        "Component", "ComponentVersion", "Release", "Target", "Registry", "RegistryBinding", "ReleaseBinding",
        "ReferenceGrant",
    ],
    "porch.kpt.dev/v1alpha2": ["PackageRevision"],
    "config.porch.kpt.dev/v1alpha1": ["Repository"],
    "helm.deckhouse.io/v1alpha1": ["HelmClusterAddon", "HelmClusterAddonRepository", "HelmClusterAddonChart"],
}  # fmt: skip
CLUSTER_SCOPED = {"HelmClusterAddon", "HelmClusterAddonRepository", "HelmClusterAddonChart"}


def write_state(directory: Path, per_kind: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for api_version, kinds in KINDS.items():
        for kind in kinds:
            items = []
            for i in range(per_kind):
                meta = {"name": f"{kind.lower()}-{i}", "labels": {"app": f"a{i % 50}"}}
                if kind not in CLUSTER_SCOPED:
                    meta["namespace"] = f"ns-{i % 100}"
                obj = {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {}}
                if kind == "ComponentVersion":
                    obj["spec"] = {"componentRef": {"name": f"component-{i}"}, "tag": f"v1.{i}.0"}
                    obj["status"] = {"conditions": [{
                        "type": "Available", "status": "False" if i % 2 else "True", "reason": "ArtifactMissing",
                        "message": "manifest not found", "lastTransitionTime": "2026-11-28T10:15:00Z"}]}  # fmt: skip
                if kind == "Release":
                    obj["spec"] = {"componentVersionRef": {"name": f"componentversion-{i}"}}
                items.append(obj)
            (directory / f"{kind}.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def review_body() -> bytes:
    obj = {"apiVersion": "solar.opendefense.cloud/v1alpha1", "kind": "Release",
           "metadata": {"name": "bench", "namespace": "ns-1"},
           "spec": {"componentVersionRef": {"name": "componentversion-1"}}}  # fmt: skip
    gvk = {"group": "solar.opendefense.cloud", "version": "v1alpha1", "kind": "Release"}
    req = {"uid": "bench-uid", "kind": gvk, "resource": {**gvk, "resource": "releases"}, "name": "bench",
           "namespace": "ns-1", "operation": "CREATE", "userInfo": {"username": "bench"}, "object": obj,
           "oldObject": None, "dryRun": False}  # fmt: skip
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}).encode()


LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[{body}]]
"""


def wrk(url: str, connections: int, seconds: int, script: Path) -> float:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), url],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not match or "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk reported errors:\n{out}")
    return float(match.group(1))


class Proc:
    def __init__(self, cmd: list[str], probe: str, log: Path) -> None:
        self.log = log.open("wb")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT)
        self.probe = probe

    def wait(self) -> None:
        def up() -> bool:
            try:
                return httpx.get(self.probe, timeout=1, verify=False).status_code < 500
            except httpx.HTTPError:
                return False

        wait_until(up, timeout=300, what=self.probe)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--objects", type=int, default=10_000, help="objects of each guarded kind")
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")
    tmp = Path(tempfile.mkdtemp(prefix="bench-admission-"))
    write_dev_certs(tmp / "certs", ["localhost"])
    started = time.perf_counter()
    write_state(tmp / "state", args.objects)
    body = review_body()
    script = tmp / "post.lua"
    script.write_text(LUA.format(body=body.decode()))

    bare_port, warden_port, probe_port = free_port(), free_port(), free_port()
    bare = Proc([sys.executable, "-m", "uvicorn", "bench.bare_app:app", "--host", "127.0.0.1", "--port",
                 str(bare_port), "--ssl-certfile", str(tmp / "certs/tls.crt"), "--ssl-keyfile",
                 str(tmp / "certs/tls.key"), "--log-level", "warning", "--no-access-log"],
                f"https://127.0.0.1:{bare_port}/", tmp / "bare.log")  # fmt: skip
    warden_cmd = [sys.executable, "-m", "webhook.cli", "serve", "--cert-dir", str(tmp / "certs"), "--state",
                  str(tmp / "state"), "--host", "127.0.0.1", "--port", str(warden_port), "--probe-host",
                  "127.0.0.1", "--probe-port", str(probe_port)]  # fmt: skip
    warden = Proc([*warden_cmd, "--log-level", "warning"], f"http://127.0.0.1:{probe_port}/readyz", tmp / "w.log")
    bare.wait()
    warden.wait()
    print(f"state: {args.objects:,} objects of each of {sum(map(len, KINDS.values()))} kinds "
          f"(written and loaded in {time.perf_counter() - started:.1f} s)")  # fmt: skip
    print(f"{'in flight':>9} | {'bare req/s':>10} | {'warden req/s':>12} | ratio (target >= 0.80)")
    for c in (1, 16, 64, 256):
        floor = wrk(f"https://127.0.0.1:{bare_port}/validate/catalog", c, args.seconds, script)
        ours = wrk(f"https://127.0.0.1:{warden_port}/validate/catalog", c, args.seconds, script)
        print(f"{c:>9} | {floor:>10.0f} | {ours:>12.0f} | {ours / floor:.2f}")
    warden.stop()

    # Server-side latency at 64 in flight, from the server's own log lines.
    log_path = tmp / "w-info.log"
    warden = Proc([*warden_cmd, "--log-level", "info"], f"http://127.0.0.1:{probe_port}/readyz", log_path)
    warden.wait()
    wrk(f"https://127.0.0.1:{warden_port}/validate/catalog", 64, args.seconds, script)
    warden.stop()
    durations = sorted(
        e["duration_ms"] for e in map(json.loads, log_path.read_text().splitlines()) if e.get("msg") == "admission"
    )
    p50, p99 = durations[len(durations) // 2], durations[int(len(durations) * 0.99)]
    print(f"server-side at 64 in flight over {len(durations):,} requests: p50 {p50:.3f} ms, p99 {p99:.3f} ms "
          f"(target <= 5 ms: ratio {p99 / 5:.3f})")  # fmt: skip
    bare.stop()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
