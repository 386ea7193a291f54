#!/usr/bin/env bash
# The other supported Pythons found on this machine (3.11-3.13, besides the one .ci/run used):
# each gets its own venv with everything .ci/run installs, then the main command and the test
# suite but its `slow` modules, which the first Python ran (REQUIRE_OPTIONAL_PARTS comes from
# .ci/run: no skips).
# Usage: .ci/other_pythons.sh X.Y  (the version already tested, skipped here).
set -euo pipefail
cd "$(dirname "$0")/.."
TESTED="$1"
VENVS="${DD_CI_VENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/delegate-debugger/ci-venvs}"

find_python() {  # an interpreter of version $1 that runs, from PATH or pyenv's versions
  local v="$1" c
  for c in "python$v" "$(pyenv root 2>/dev/null)"/versions/"$v"*/bin/"python$v"; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'pass' >/dev/null 2>&1; then
      command -v "$c"; return 0
    fi
  done
  return 1
}

for v in 3.11 3.12 3.13; do
  [ "$v" = "$TESTED" ] && continue
  if ! py="$(find_python "$v")"; then
    echo "note: no Python $v on this machine; not tested here" >&2
    continue
  fi
  echo "== Python $v ($py)"
  venv="$VENVS/py$v"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  pip_log="$venv/pip-install.log"
  { "$venv/bin/python" -m pip install -q --upgrade pip && "$venv/bin/python" -m pip install -q -e '.[dev,executorch,hf,explorer,team]'; } \
    >"$pip_log" 2>&1 || { tail -40 "$pip_log" >&2; echo "error: install failed on Python $v" >&2; exit 1; }
  work="$(mktemp -d)"
  # The main command, in a directory of its own (nothing written into the checkout).
  (cd "$work" && "$venv/bin/python" -m pipeline model=vit backend=xnnpack tracking=none \
      cache_dir="$work/cache" hydra.run.dir="$work/run") >"$work/main.log" 2>&1 \
    || { tail -40 "$work/main.log" >&2; echo "error: main command failed on Python $v" >&2; exit 1; }
  grep -q "== pipeline summary ==" "$work/main.log"
  rm -rf "$work"
  # The README's test command without the long end-to-end modules (`slow`, tests/conftest.py):
  # .ci/run ran every test on the first Python; three whole suites overrun CI's time.
  "$venv/bin/python" -m pytest -n 2 -q -p no:cacheprovider -m "not slow"
done
