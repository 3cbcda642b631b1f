#!/usr/bin/env bash
# OpenMPI's remote-shell agent for namespace hosts (--mca plm_rsh_agent): "netns_rsh.sh HOST CMD..."
# runs CMD inside network namespace HOST, the way ssh would run it on a real host.
#
# The namespaces share one hostname and one /tmp, so every daemon would build its session directory
# under the same /tmp/ompi.<hostname>.<uid>/jf.<job> path; daemons starting together then race on its
# mkdir and one fails with "File exists".  Real hosts have their own /tmp: give each namespace its own.
host=$1
shift
tmp="${TMPDIR:-/tmp}/loom-netns-tmp/$host"
mkdir -p "$tmp"
export OMPI_MCA_orte_tmpdir_base="$tmp"
# They share one hostname too, so OpenMPI would take ranks of different namespace hosts for ranks of
# one node and join them by shared memory (its vader btl then crashes): each gets its own UTS namespace
# named after the host, as a real host has its own name.
exec ip netns exec "$host" unshare --uts /bin/sh -c "hostname '$host' && $*"
