#!/usr/bin/env bash
# Set up .venv/ with diskplan and its dependencies on a fresh Debian/Ubuntu machine.
#   scripts/bootstrap.sh          what the planner needs (libparted, a compiler for pyparted)
#   scripts/bootstrap.sh --test   also the referee tools the tests compare against
# As root, missing Debian packages are installed with apt-get; otherwise the exact command is printed.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[ "${1:-}" = "--test" ] && want_test=1

# Debian package -> a file that proves it is installed
declare -A need=(
  [libparted-dev]=/usr/include/parted/parted.h
  [pkg-config]=/usr/bin/pkg-config
  [gcc]=/usr/bin/gcc
)
declare -A wish=()  # installed when possible; a test that needs one says so and is skipped otherwise
if [ "$want_test" = 1 ]; then
  need+=([parted]=/usr/sbin/parted [fdisk]=/usr/sbin/sfdisk [gdisk]=/usr/sbin/gdisk [tmux]=/usr/bin/tmux)
  # filesystems the data-move tests create, check and read back (tests/test_move_disk.py)
  need+=([e2fsprogs]=/usr/sbin/e2fsck [xfsprogs]=/usr/sbin/mkfs.xfs [btrfs-progs]=/usr/sbin/mkfs.btrfs
         [dosfstools]=/usr/sbin/mkfs.vfat [mtools]=/usr/bin/mcopy)
  # filesystems the resize tests grow and shrink (tests/test_resize_disk.py)
  need+=([ntfs-3g]=/usr/sbin/ntfsresize)
  # the storage stack's headers, made by the real tools (tests/test_stack.py); mdadm only reads ours
  need+=([lvm2]=/usr/sbin/pvcreate [cryptsetup-bin]=/usr/sbin/cryptsetup [mdadm]=/usr/sbin/mdadm)
  # the browser that loads `diskplan serve`'s page (tests/test_serve.py, through Playwright): optional, as
  # some distributions ship it only as a snap; without it that one test is skipped and says why
  wish+=([chromium]=/usr/lib/chromium/chromium)
  # the fleet formats' referees (tests/test_fleet_formats.py): systemd-repart, and ansible-playbook with the
  # community.general collection (Debian's ansible package bundles it: no Galaxy download)
  need+=([systemd]=/usr/bin/systemd-repart
         [ansible]=/usr/lib/python3/dist-packages/ansible_collections/community/general/plugins/modules/parted.py)
  # the guest-machine tier (scripts/guestvm.py, tests/test_guest_*.py): QEMU boots the Debian kernel with a
  # busybox initramfs; udevd and dmsetup run inside the guest. Optional: without them those tests are skipped
  wish+=([qemu-system-x86]=/usr/bin/qemu-system-x86_64 [busybox-static]=/bin/busybox
         [linux-image-amd64]=/usr/share/doc/linux-image-amd64/copyright [udev]=/lib/systemd/systemd-udevd
         [dmsetup]=/sbin/dmsetup)
  # the Ignition export has no tool here: its JSON is checked against the spec's schema with python-jsonschema
  need+=([python3-jsonschema]=/usr/lib/python3/dist-packages/jsonschema/__init__.py)
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  echo "diskplan needs Python >= 3.11 as '$PY' (set PYTHON=... to choose another)." >&2
  exit 1
fi
# Debian's python3 needs its headers and venv module; a self-built Python has both.
if ! "$PY" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  need+=([python3-dev]=/nonexistent-python-dev)
fi
if ! "$PY" -c 'import ensurepip' 2>/dev/null; then
  need+=([python3-venv]=/nonexistent-python-venv)
fi

missing=()
for pkg in "${!need[@]}"; do
  [ -e "${need[$pkg]}" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || true
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "diskplan needs these Debian packages. Run:" >&2
    echo "    sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

wished=()
for pkg in "${!wish[@]}"; do
  [ -e "${wish[$pkg]}" ] || wished+=("$pkg")
done
if [ ${#wished[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -qq --no-install-recommends "${wished[@]}" >/dev/null 2>&1 ||
      echo "Could not install ${wished[*]}: the tests that need it are skipped, with the reason." >&2
  else
    echo "Optional, for a few tests (skipped without): sudo apt-get install -y ${wished[*]}" >&2
  fi
fi

stamp=.venv/.diskplan-installed
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# Reinstall only when the project's metadata changed since the last install.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch "$stamp"
fi
