#!/usr/bin/env bash
# OpenMPI's remote-shell agent for namespace hosts (--mca plm_rsh_agent): "netns_rsh.sh HOST CMD..."
# runs CMD inside network namespace HOST, the way ssh would run it on a real host.
host=$1
shift
exec ip netns exec "$host" /bin/sh -c "$*"
