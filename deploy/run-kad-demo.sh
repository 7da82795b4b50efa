#!/usr/bin/env bash
# Starts kad on a private socket, runs kad-demo against it, then stops kad
# with SIGTERM (it drains and exits 0). Usage: run-kad-demo.sh KAD KAD_DEMO
set -euo pipefail
kad=$1
demo=$2
dir=$(mktemp -d /tmp/kad-demo-XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT

"$kad" --listen "unix:$dir/kad.sock" --ready-file "$dir/ready" 2>&1 | sed -u 's/^/  [kad] /' &
pid=$(jobs -p | tail -1)
for _ in $(seq 300); do [ -f "$dir/ready" ] && break; sleep 0.1; done
[ -f "$dir/ready" ] || { echo "kad did not start" >&2; exit 1; }
"$demo" "unix:$dir/kad.sock"
kill -TERM "$(pgrep -f -- "--ready-file $dir/ready" | head -1)"
wait "$pid"
pid=
