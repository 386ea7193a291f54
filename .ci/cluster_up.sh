#!/usr/bin/env bash
# CI parts beyond one process: Debian's PostgreSQL (the team-server test starts its own cluster
# from it; the `[team]` extra brings its driver) and a one-node SLURM cluster (.ci/slurm_up.sh).
# Stop the cluster after the tests: .ci/slurm_up.sh down.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
    || echo "warning: could not install postgresql; the team-server tests will fail" >&2
fi
if [ "$(id -u)" -eq 0 ]; then
  .ci/slurm_up.sh
else
  echo "warning: not root, no SLURM cluster started; the submitit_slurm test will fail" >&2
fi
