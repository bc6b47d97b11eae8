#!/usr/bin/env bash
# Checks the shipped units the way systemd will read them:
#   deploy/systemd/verify.sh [BIN_DIR]     (default: ./build/bin)
# `systemd-analyze verify` in a scratch root holding the units, the
# binaries they name (/usr/local/bin/bcs-mm, bcs-nm, copied from BIN_DIR)
# and this machine's system units; any diagnostic at all (an unknown key is
# only a warning to systemd) fails. Then the house rules for the units:
# a dedicated non-root User=, the token from LoadCredential and never on
# ExecStart or in Environment=; and bcs-sysusers.conf makes that user.
# Exit 0: both units pass; 1: a unit fails (why is printed); 77: no
# systemd-analyze here.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$(cd "${1:-$here/../../build/bin}" && pwd)
command -v systemd-analyze >/dev/null || { echo "verify: no systemd-analyze: skipped"; exit 77; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system" "$root/usr/lib/systemd"
cp "$bin/bcs-mm" "$bin/bcs-nm" "$root/usr/local/bin/"
cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"
units=(bcs-mm.service bcs-nm.service)
rc=0
for u in "${units[@]}"; do
  cp "$here/$u" "$root/etc/systemd/system/"
  out=$(systemd-analyze verify --root="$root" "/etc/systemd/system/$u" 2>&1) || rc=1
  if [[ -n $out ]]; then echo "$u: systemd-analyze verify says:"; echo "$out"; rc=1; fi
  f=$here/$u
  user=$(sed -n 's/^User=//p' "$f")
  [[ -n $user && $user != root && $user != 0 ]] || { echo "$u: no dedicated User= (root?)"; rc=1; }
  grep -q '^LoadCredential=token:' "$f" || { echo "$u: the token does not come from LoadCredential"; rc=1; }
  if grep -E '^(ExecStart|Environment)=' "$f" | grep -Eq 'TOKEN|--token( |=)'; then
    echo "$u: a token on the command line or in the environment"; rc=1
  fi
  ((rc == 0)) && echo "$u: ok (User=$user)"
done
# The user they run as: bcs-sysusers.conf creates it (dry run in the root).
mkdir -p "$root/etc"
if out=$(systemd-sysusers --dry-run --root="$root" "$here/bcs-sysusers.conf" 2>&1) &&
   grep -q "Creating user 'bcs'" <<< "$out"; then
  echo "bcs-sysusers.conf: ok"
else
  echo "bcs-sysusers.conf: systemd-sysusers says:"; echo "$out"; rc=1
fi
exit "$rc"
