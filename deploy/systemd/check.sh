#!/usr/bin/env bash
# Checks deploy/systemd offline, as the test suite does: the unit passes
# `systemd-analyze verify` with nothing to say (its ExecStart pointed at the
# kad that was built, which verify requires to exist), and the sysusers file
# parses (`systemd-sysusers --dry-run`). Reports the unit's exposure score
# (`systemd-analyze security --offline`).
#   deploy/systemd/check.sh KAD_BINARY
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
kad="${1:?usage: check.sh KAD_BINARY}"
if ! command -v systemd-analyze >/dev/null; then
  echo "check.sh: skipped: no systemd-analyze (Debian package systemd)" >&2
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s|/usr/local/bin/kad|$kad|" "$here/kad.service" > "$work/kad.service"
if ! grep -q "^ExecStart=$kad " "$work/kad.service"; then
  echo "check.sh: kad.service does not start /usr/local/bin/kad" >&2
  exit 1
fi
said=$(systemd-analyze verify "$work/kad.service" 2>&1) || { echo "$said" >&2; exit 1; }
if [ -n "$said" ]; then
  echo "check.sh: systemd-analyze verify has something to say about kad.service:" >&2
  echo "$said" >&2
  exit 1
fi
said=$(systemd-sysusers --dry-run "$here/kad.sysusers" 2>&1) || { echo "$said" >&2; exit 1; }
if grep -qi "invalid\|failed\|unknown" <<<"$said"; then
  echo "check.sh: kad.sysusers: $said" >&2
  exit 1
fi
systemd-analyze security --offline=true --no-pager "$work/kad.service" | tail -1
echo "check.sh: kad.service and kad.sysusers pass"
