#!/usr/bin/env bash
# egs-demo's command line: every bad flag exits 2 with a message that names the flag and the
# reason, before anything runs; --help exits 0. Uses a two-node Tiresias cluster of its own.
# Usage: egs_demo_cli_test.sh EGS_DEMO
set -uo pipefail
demo=$1
source "$(dirname "$0")/cli_test_lib.sh"
mkdir -p "$work/traces/tiresias"
printf 'num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,2,4,128,254\n' \
  >"$work/traces/tiresias/cluster_spec.csv"
printf 'job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,164,30\n' \
  >"$work/traces/tiresias/60_job.csv"

# bad ARGS... -- EXPECTED: egs-demo must exit 2, print EXPECTED on stderr and nothing on stdout.
bad() {
  local expected=${*: -1}
  local args=("${@:1:$#-2}")
  "$demo" "${args[@]}" >"$work/stdout" 2>"$work/stderr"
  refused $? "$expected" "${args[@]}" || return 0
  if [[ -s $work/stdout ]]; then
    echo "FAIL: ${args[*]}: printed on stdout" >&2
    failures=$((failures + 1))
  fi
}

t=(--traces "$work/traces")
# Read as far as they were numbers: "4x" was 4, "1.5" was 1.
bad "${t[@]}" --nodes 2x -- "--nodes: must be a whole number, got '2x'"
bad "${t[@]}" --nodes 1.5 -- "--nodes: must be a whole number, got '1.5'"
bad "${t[@]}" --nodes " 1" -- "--nodes: must be a whole number"
bad "${t[@]}" --nodes 0 -- "--nodes: must be >= 1"
# "unknown argument '--nodes'" for a missing value.
bad "${t[@]}" --nodes -- "--nodes: needs a value"
bad --traces -- "--traces: needs a value"
bad --traces --nodes 2 -- "--traces: needs a value"
# Empty: the traces were looked for under /.
bad --traces "" -- "--traces: is empty"
# Given twice, the last one won.
bad "${t[@]}" --nodes 1 --nodes 2 -- "--nodes: is given twice"
bad "${t[@]}" --traces "$work/traces" -- "--traces: is given twice"
# More nodes than the cluster has was the whole cluster.
bad "${t[@]}" --nodes 3 -- "--nodes: 3 is more than the 2 nodes of the Tiresias cluster"
bad "${t[@]}" --bogus -- "unknown argument '--bogus'"

if ! "$demo" --help >"$work/stdout" 2>"$work/stderr" || ! grep -qF "usage: egs-demo" "$work/stdout"; then
  echo "FAIL: --help: want exit 0 and the usage on stdout" >&2
  failures=$((failures + 1))
fi
if ! "$demo" "${t[@]}" --nodes 2 >"$work/stdout" 2>"$work/stderr"; then
  echo "FAIL: --nodes 2: $(cat "$work/stderr")" >&2
  failures=$((failures + 1))
fi

finish egs-demo
