#!/usr/bin/env bash
# The package claims Python 3.11 to 3.13: run the command-line and planner tests once more on the newest
# Python 3.12+ this machine has (on PATH, or under pyenv), in .venv-newest/. Without one, say so and pass.
set -euo pipefail
cd "$(dirname "$0")/.."

TESTS=(tests/test_ui_startup.py tests/test_apply_cli.py tests/test_check_output.py
       tests/test_isolate_threads.py tests/test_textual_private.py)

newest=""
candidates=(python3.14 python3.13 python3.12)
if command -v pyenv >/dev/null; then
  root=$(pyenv root)
  for v in 14 13 12; do candidates+=("$root"/versions/3."$v".*/bin/python3."$v"); done
fi
for py in "${candidates[@]}"; do
  if "$py" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
    newest=$py
    break
  fi
done
if [ -z "$newest" ]; then
  echo "newest-Python run skipped: no Python 3.12 or newer on this machine (only the suite above ran)."
  exit 0
fi
version=$("$newest" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
echo "The command-line and planner tests again, on Python $version ($newest):"
venv=.venv-newest
stamp=$venv/.diskplan-installed-$version
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  rm -rf "$venv"
  "$newest" -m venv "$venv"
  "$venv"/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  log=$(mktemp)
  if ! "$venv"/bin/python -m pip install -q -e . pytest hypothesis pytest-textual-snapshot >"$log" 2>&1; then
    grep -v '^WARNING: Location' "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  touch "$stamp"
fi
"$venv"/bin/python -m pytest -q -p no:cacheprovider "${TESTS[@]}"
