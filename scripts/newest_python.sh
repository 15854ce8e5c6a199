#!/usr/bin/env bash
# The package claims Python 3.11 to 3.13: run the command-line and planner tests once more on the newest
# Python 3.12+ this machine has (on PATH, or under pyenv), in a venv cached under ~/.cache/diskplan/. Without one,
# say so and pass.
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
version=$("$newest" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
echo "The command-line and planner tests again, on Python $version ($newest):"
# The venv holds the dependencies only (what pyproject.toml names, and the test tools), and lives outside the
# checkout: a fresh clone (CI) finds it already built instead of spending a minute on it. Its name carries this
# Python and pyproject.toml's digest, so a change of either builds another. The project itself is taken from
# src/ (PYTHONPATH, which `python -m diskplan` children inherit), so every checkout can share one venv.
cache=${XDG_CACHE_HOME:-$HOME/.cache}/diskplan
digest=$( (realpath "$(command -v "$newest")"; cat pyproject.toml) | sha256sum | cut -c1-16)
venv=$cache/venv-newest-$version-$digest
mkdir -p "$cache"
(
  flock 9  # one build at a time; the others wait for it and use it
  if [ ! -f "$venv/.complete" ]; then
    rm -rf "$venv"
    for old in "$cache"/venv-newest-*/.complete; do  # the venvs no run used for a week
      if [ -e "$old" ] && [ -n "$(find "$old" -mtime +7)" ]; then rm -rf "$(dirname "$old")"; fi
    done
    "$newest" -m venv "$venv"
    log=$(mktemp)
    mapfile -t deps < <("$newest" -c 'import sys, tomllib
print("\n".join(tomllib.load(sys.stdin.buffer)["project"]["dependencies"]))' < pyproject.toml)
    if ! "$venv"/bin/python -m pip install -q "${deps[@]}" pytest hypothesis pytest-textual-snapshot >"$log" 2>&1; then
      grep -v '^WARNING: Location' "$log" >&2
      rm -f "$log"
      rm -rf "$venv"
      exit 1
    fi
    rm -f "$log"
  fi
  touch "$venv/.complete"  # complete, and used now (the clean-up above keeps it a week)
) 9>"$cache/venv-newest.lock"
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" "$venv"/bin/python -m pytest -q -p no:cacheprovider "${TESTS[@]}"
