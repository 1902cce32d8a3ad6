# permfs.sh: ask a permfs mount from a shell script. Source it (POSIX sh;
# tested with bash and dash), then:
#
#   . clients/permfs.sh
#   if answer=$(permfs_ask /mnt/permfs/sessions/main '{"surface":"bash","value":"make"}'); then
#     make
#   fi
#
# Contract: permfs_ask SESSION_DIR JSON
#   prints the response JSON (pretty, as the mount serves it) on stdout and
#   returns 0 approved (allow), 1 not approved (deny, timeout, cancelled, ...:
#   the response's "outcome" says which), 2 could not ask (no such session,
#   not its asker, no answer) or the request was invalid (the response, when
#   there is one, says why). It blocks until the ask is decided.
#
# Why it is built this way: it uses the one-descriptor ask (outbox/<rid>,
# no suffix), inside a subshell. The subshell's descriptor is the ask: when
# the wait ends any other way (Ctrl-C, the script killed), the subshell dies,
# its descriptor closes, and the daemon withdraws the ask. There is no
# request file to remove, so nothing is left behind. The rid is random
# (8 bytes of /dev/urandom), so concurrent asks never collide.

permfs_ask() (
  if [ "$#" -ne 2 ]; then
    echo "usage: permfs_ask SESSION_DIR JSON" >&2
    exit 2
  fi
  rid="sh-$$-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" || exit 2
  exec 3<>"$1/outbox/$rid" || exit 2
  printf '%s' "$2" >&3 || exit 2
  # The first read asks and waits for the decision.
  answer=$(cat <&3) || exit 2
  exec 3>&-
  [ -n "$answer" ] || { echo "permfs_ask: no answer to $rid" >&2; exit 2; }
  printf '%s\n' "$answer"
  # The mount serves pretty JSON: top-level keys are indented two spaces.
  case $answer in
    *'
  "approved": true,'*) exit 0 ;;
    *'
  "outcome": "invalid",'* | *'"outcome":"invalid"'*) exit 2 ;;
    *) exit 1 ;;
  esac
)
