# Shared by the command-line tests in this folder (sourced after `set -uo pipefail`): a scratch
# directory $work removed on exit, the failure count $failures, `refused` and `finish`.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# refused RC EXPECTED ARGS...: a run of ARGS that must have exited 2 with EXPECTED in
# $work/stderr. Returns 0 when it did; otherwise says why, counts a failure and returns 1.
refused() {
  local rc=$1 expected=$2
  shift 2
  if [[ $rc -ne 2 ]]; then
    echo "FAIL: $*: exit $rc, want 2" >&2
  elif ! grep -qF -- "$expected" "$work/stderr"; then
    echo "FAIL: $*: stderr does not say '$expected':" >&2
    cat "$work/stderr" >&2
  else
    return 0
  fi
  failures=$((failures + 1))
  return 1
}

# finish PROGRAM: the last line of a test: exits 1 saying how many checks failed, else 0.
finish() {
  if [[ $failures -ne 0 ]]; then
    echo "$failures $1 command-line check(s) failed" >&2
    exit 1
  fi
  echo "$1 command line: all checks passed"
}
