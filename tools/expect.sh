# Sourced by the tools' end-to-end checks: expect <description> <pattern> <command...> runs the command
# and, when its output (stdout and stderr) has no line matching the pattern, says so and sets fail=1.
fail=0
expect() {
  local what=$1 pattern=$2
  shift 2
  if ! "$@" 2>&1 | grep -q -- "$pattern"; then
    echo "FAIL: $what: no '$pattern' in the output of: $*"
    fail=1
  fi
}
