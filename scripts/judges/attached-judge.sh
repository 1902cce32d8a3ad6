#!/usr/bin/env bash
# An example judge attached through the mount: it claims a link name, then
# serves reviews with plain file I/O. Run it as root or the mount's owner.
#
#   scripts/judges/attached-judge.sh ./mount reviewer-bot
#
# With "authorizerChain": ["reviewer-bot"] in the config, every ask an
# adjudicating session would otherwise put to a person comes here first.
# This one allows `cargo test` commands and defers everything else.
set -euo pipefail
mount=${1:?usage: attached-judge.sh MOUNT NAME}
name=${2:?usage: attached-judge.sh MOUNT NAME}
dir="$mount/judges/$name"
mkdir "$dir"                                   # claim the name
exec 3<"$dir/lease"                            # held while we live: if we die, our reviews defer
trap 'rmdir "$dir" 2>/dev/null' EXIT
while review=$(cat "$dir/next"); do            # blocks until a review comes
  id=$(printf '%s' "$review" | python3 -c 'import json,sys; print(json.load(sys.stdin)["reviewId"])')
  if printf '%s' "$review" | grep -q '"cargo test'; then verdict=allow; else verdict=defer; fi
  # A verdict can be refused: the review timed out, or a server restart
  # walked it again under a new id (it comes back through next).
  printf '{"reviewId":"%s","verdict":"%s"}' "$id" "$verdict" > "$dir/verdict" \
    || echo "attached-judge: verdict on $id refused" >&2
done
