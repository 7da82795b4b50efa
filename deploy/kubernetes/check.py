#!/usr/bin/env python3
"""The structure check of deploy/kubernetes (no cluster needed).

    check.py RENDERED.yaml KAD_BINARY

RENDERED.yaml is `kubectl kustomize deploy/kubernetes`. Checks that the
fields used are Kubernetes' own (a typo would be dropped silently by a
lenient apply), that the pieces agree with each other (selectors and labels,
ports and kad's settings, the socket's hostPath and the probes, the client's
groups and kad's socket group), that kad runs unprivileged, and that kad
accepts its settings (`kad --config kad.toml --check-config`).
"""
import os
import subprocess
import sys
import tempfile
import tomllib

import yaml

# The fields of the Kubernetes objects these manifests use (core/v1, apps/v1,
# batch/v1), so that a misspelt one is an error here.
POD_SPEC = {"containers", "initContainers", "volumes", "nodeSelector", "tolerations",
            "securityContext", "terminationGracePeriodSeconds", "restartPolicy",
            "runtimeClassName", "serviceAccountName", "priorityClassName", "affinity",
            "hostNetwork", "hostPID", "hostIPC", "dnsPolicy", "imagePullSecrets"}
CONTAINER = {"name", "image", "imagePullPolicy", "command", "args", "env", "envFrom", "ports",
             "startupProbe", "readinessProbe", "livenessProbe", "resources", "securityContext",
             "volumeMounts", "workingDir", "lifecycle", "terminationMessagePolicy"}
CONTAINER_SECURITY = {"allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities",
                      "seccompProfile", "runAsNonRoot", "runAsUser", "runAsGroup", "privileged"}
POD_SECURITY = {"runAsNonRoot", "runAsUser", "runAsGroup", "supplementalGroups", "fsGroup",
                "seccompProfile"}
PROBE = {"exec", "grpc", "httpGet", "tcpSocket", "initialDelaySeconds", "periodSeconds",
         "timeoutSeconds", "failureThreshold", "successThreshold"}
VOLUME_MOUNT = {"name", "mountPath", "subPath", "readOnly"}
VOLUME_SOURCES = {"hostPath", "configMap", "secret", "emptyDir"}

errors = []


def fail(where, what):
    errors.append(f"{where}: {what}")


def known(where, obj, fields):
    for key in obj:
        if key not in fields:
            fail(where, f"`{key}` is not a field kad's manifests use here (a typo?)")


def check_pod(where, spec):
    known(where + ".spec", spec, POD_SPEC)
    known(where + ".spec.securityContext", spec.get("securityContext", {}), POD_SECURITY)
    volumes = {}
    for v in spec.get("volumes", []):
        sources = [k for k in v if k != "name"]
        if len(sources) != 1 or sources[0] not in VOLUME_SOURCES:
            fail(where, f"volume {v.get('name')} has sources {sources}")
        volumes[v["name"]] = v
    for c in spec["containers"]:
        cw = f"{where}.containers[{c['name']}]"
        known(cw, c, CONTAINER)
        known(cw + ".securityContext", c.get("securityContext", {}), CONTAINER_SECURITY)
        sc = c.get("securityContext", {})
        if sc.get("allowPrivilegeEscalation") is not False:
            fail(cw, "allowPrivilegeEscalation must be false")
        if sc.get("readOnlyRootFilesystem") is not True:
            fail(cw, "readOnlyRootFilesystem must be true")
        if sc.get("capabilities", {}).get("drop") != ["ALL"]:
            fail(cw, "capabilities must drop ALL")
        if sc.get("privileged"):
            fail(cw, "must not be privileged")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            if probe in c:
                known(f"{cw}.{probe}", c[probe], PROBE)
        for m in c.get("volumeMounts", []):
            known(cw + ".volumeMounts", m, VOLUME_MOUNT)
            if m["name"] not in volumes:
                fail(cw, f"mounts volume {m['name']}, which the pod does not have")
        if "requests" not in c.get("resources", {}):
            fail(cw, "has no resource requests")
    pod_sc = spec.get("securityContext", {})
    if pod_sc.get("runAsNonRoot") is not True or pod_sc.get("runAsUser", 0) == 0:
        fail(where, "the pod must run as a non-root user (runAsNonRoot, runAsUser)")
    return volumes


def host_path_mount(volumes, container, path):
    """The mount path in `container` of the hostPath volume at `path`."""
    for m in container.get("volumeMounts", []):
        v = volumes.get(m["name"], {})
        if v.get("hostPath", {}).get("path") == path:
            return m["mountPath"]
    return None


def main(rendered, kad):
    docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
    by_kind = {}
    for d in docs:
        for key in ("apiVersion", "kind", "metadata"):
            if key not in d:
                fail(d.get("kind", "?"), f"has no {key}")
        if d["kind"] != "Namespace" and d["metadata"].get("namespace") != "kad-system":
            fail(f"{d['kind']}/{d['metadata']['name']}", "is not in the namespace kad-system")
        by_kind.setdefault(d["kind"], []).append(d)

    toml_text = next(c for c in by_kind["ConfigMap"] if c["metadata"]["name"] == "kad-config")[
        "data"]["kad.toml"]
    settings = tomllib.loads(toml_text)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(toml_text)
    checked = subprocess.run([kad, "--config", f.name, "--check-config"], capture_output=True,
                             text=True)
    os.unlink(f.name)
    if checked.returncode != 0:
        fail("ConfigMap/kad-config", f"kad refuses kad.toml: {checked.stdout}{checked.stderr}")
    unix = [u[5:] for u in settings["listen"] if u.startswith("unix:")]
    tcp = [int(u.rsplit(":", 1)[1]) for u in settings["listen"] if u.startswith("tcp://")]
    metrics_port = int(settings["metrics"].rsplit(":", 1)[1])

    ds = by_kind["DaemonSet"][0]
    spec = ds["spec"]["template"]["spec"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in ds["spec"]["selector"]["matchLabels"].items()):
        fail("DaemonSet/kad", "its selector does not match its pods' labels")
    if not spec.get("nodeSelector"):
        fail("DaemonSet/kad", "selects no nodes by label")
    volumes = check_pod("DaemonSet/kad", spec)
    kad_container = spec["containers"][0]
    socket_dir = host_path_mount(volumes, kad_container, "/run/kad")
    if not unix or socket_dir is None or os.path.dirname(unix[0]) != socket_dir:
        fail("DaemonSet/kad", f"kad's socket {unix} is not in the hostPath /run/kad mount")
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        command = kad_container.get(probe, {}).get("exec", {}).get("command", [])
        if "health" not in command or f"unix:{unix[0]}" not in command:
            fail("DaemonSet/kad", f"{probe} is not `kactl --connect unix:{unix[0]} health`")
    ports = {p["name"]: p["containerPort"] for p in kad_container["ports"]}
    if ports.get("grpc") not in tcp:
        fail("DaemonSet/kad", f"port grpc {ports.get('grpc')} is not where kad listens {tcp}")
    if ports.get("metrics") != metrics_port:
        fail("DaemonSet/kad", f"port metrics {ports.get('metrics')} is not kad's {metrics_port}")
    if spec.get("terminationGracePeriodSeconds", 30) <= settings.get("drain_timeout", 30):
        fail("DaemonSet/kad", "terminationGracePeriodSeconds does not outlast drain_timeout")
    annotations = ds["spec"]["template"]["metadata"].get("annotations", {})
    if annotations.get("prometheus.io/port") != str(metrics_port):
        fail("DaemonSet/kad", "the prometheus.io/port annotation is not kad's metrics port")

    for svc in by_kind["Service"]:
        where = f"Service/{svc['metadata']['name']}"
        if any(labels.get(k) != v for k, v in svc["spec"]["selector"].items()):
            fail(where, "selects no kad pod")
        for p in svc["spec"]["ports"]:
            if p["targetPort"] not in ports:
                fail(where, f"targets port {p['targetPort']}, which kad's pod does not name")

    kad_gid = spec["securityContext"]["runAsGroup"]
    for job in by_kind.get("Job", []):
        where = f"Job/{job['metadata']['name']}"
        jspec = job["spec"]["template"]["spec"]
        jvolumes = check_pod(where, jspec)
        if jspec.get("nodeSelector") != spec["nodeSelector"]:
            fail(where, "does not run on kad's nodes")
        client = jspec["containers"][0]
        if host_path_mount(jvolumes, client, "/run/kad") != socket_dir:
            fail(where, "does not mount kad's socket directory where kad has it")
        if kad_gid not in jspec.get("securityContext", {}).get("supplementalGroups", []):
            fail(where, f"is not in kad's socket group {kad_gid} (supplementalGroups)")
        if f"unix:{unix[0]}" not in client.get("command", []):
            fail(where, "does not connect to kad's socket")

    for e in errors:
        print(f"check.py: {e}", file=sys.stderr)
    if not errors:
        print(f"check.py: {len(docs)} objects agree with each other and with kad's settings")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
