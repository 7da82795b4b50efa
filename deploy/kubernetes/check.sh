#!/usr/bin/env bash
# Checks deploy/kubernetes offline, as the test suite does (no cluster is
# reachable here): kubectl renders the kustomization and decodes every
# object (`kubectl kustomize`, `kubectl label --local`), then check.py checks
# the fields and that the pieces agree with each other and with kad.
#   deploy/kubernetes/check.sh KAD_BINARY
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
kad="${1:?usage: check.sh KAD_BINARY}"
if ! command -v kubectl >/dev/null; then
  echo "check.sh: skipped: no kubectl (Debian package kubernetes-client)" >&2
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kubectl kustomize "$here" > "$work/rendered.yaml"
kubectl label --local -f "$work/rendered.yaml" kad.dev/checked=yes -o name > "$work/objects"
echo "check.sh: kubectl decodes $(wc -l < "$work/objects") objects: $(tr '\n' ' ' < "$work/objects")"
python3 "$here/check.py" "$work/rendered.yaml" "$kad"
