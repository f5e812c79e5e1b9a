#!/usr/bin/env bash
# egs-crdgen's command line: every bad flag exits 2 with a message that names the flag and the
# reason, and writes nothing; a good run exits 0.
# Usage: egs_crdgen_cli_test.sh EGS_CRDGEN
set -uo pipefail
gen=$1
source "$(dirname "$0")/cli_test_lib.sh"

# bad ARGS... -- EXPECTED: egs-crdgen must exit 2, print EXPECTED on stderr, write nothing.
bad() {
  local expected=${*: -1}
  local args=("${@:1:$#-2}")
  rm -rf "$work/out" && mkdir "$work/out"
  "$gen" "${args[@]}" >"$work/stdout" 2>"$work/stderr"
  refused $? "$expected" "${args[@]}" || return 0
  if [[ -s $work/stdout || -n $(ls -A "$work/out") ]]; then
    echo "FAIL: ${args[*]}: wrote something" >&2
    failures=$((failures + 1))
  fi
}

bad --kind -- "--kind needs a value"
bad --kind --out-dir "$work/out" -- "--kind needs a value"
# Empty, --kind meant every kind and --out-dir stdout.
bad --kind "" -- "--kind is empty"
bad --out-dir "" -- "--out-dir is empty"
# Given twice, the last one won.
bad --kind Nope --kind GPUProvisionRequest -- "--kind is given twice"
bad --out-dir "$work/out" --out-dir "$work/out" -- "--out-dir is given twice"
bad --kind Nope -- "--kind: kind \"Nope\" does not exist"
bad --bogus -- "unknown flag \"--bogus\""
# Not a directory: said so, instead of "cannot write" without a reason.
bad --out-dir "$work/missing" -- "--out-dir: $work/missing is not a directory"
touch "$work/file"
bad --out-dir "$work/file" -- "--out-dir: $work/file is not a directory"

# Good runs.
if ! "$gen" --kind GPUProvisionRequest >"$work/one.yaml" 2>"$work/stderr"; then
  echo "FAIL: --kind GPUProvisionRequest: $(cat "$work/stderr")" >&2
  failures=$((failures + 1))
fi
rm -rf "$work/out" && mkdir "$work/out"
if ! "$gen" --out-dir "$work/out" >/dev/null 2>"$work/stderr" || [[ -z $(ls -A "$work/out") ]]; then
  echo "FAIL: --out-dir: $(cat "$work/stderr")" >&2
  failures=$((failures + 1))
fi

finish egs-crdgen
