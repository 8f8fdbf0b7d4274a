#!/bin/sh
# agent.sh - the "remote shell" mpirun uses to start a rank on another "host" of the
# emulated link: each host is a network namespace. Called as ssh would be,
#   agent.sh [ssh options] HOST COMMAND...
# it drops the ssh-style options, maps HOST (an address) to its namespace through
# LINK_NS_MAP ("ADDR=NAMESPACE ADDR=NAMESPACE"), and runs COMMAND there with sh -c.
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOoPpQRSWw]) shift 2 ;;   # options that take a value
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
shift
ns=
for pair in $LINK_NS_MAP; do
  [ "${pair%%=*}" = "$host" ] && ns=${pair#*=}
done
if [ -z "$ns" ]; then
  echo "agent.sh: host '$host' is not one of the emulated link's ($LINK_NS_MAP)" >&2
  exit 255
fi
exec ip netns exec "$ns" sh -c "$*"
