#!/usr/bin/env bash
# egs-sim's command line: every bad flag exits 2 with a message that names the flag and the
# reason, and creates nothing; a good run exits 0 and writes its report.
# Usage: egs_sim_cli_test.sh EGS_SIM TRACE_CSV   (needs no shared traces)
set -uo pipefail
sim=$1
trace=$2
source "$(dirname "$0")/cli_test_lib.sh"

# bad ARGS... -- EXPECTED: egs-sim must exit 2, print EXPECTED on stderr, create no --out.
bad() {
  local expected=${*: -1}
  local args=("${@:1:$#-2}")
  local out="$work/out"
  rm -rf "$out"
  local base=(--out "$out")  # a case may name its own trace and fleet
  [[ " ${args[*]} " == *" --trace "* ]] || base+=(--trace "$trace")
  [[ " ${args[*]} " == *" --fleet "* ]] || base+=(--fleet 4x8)
  "$sim" "${base[@]}" "${args[@]}" >"$work/stdout" 2>"$work/stderr"
  refused $? "$expected" "${args[@]}" || return 0
  if [[ -e $out ]]; then
    echo "FAIL: ${args[*]}: created $out" >&2
    failures=$((failures + 1))
  fi
}

bad --policy egs,egs -- "--policy: 'egs' is given twice"
bad --policy fifo --reservation-depth 2 -- "--reservation-depth: applies to the egs policy only, and --policy does not include egs"
bad --policy easy,fifo --shadow-depth 1 -- "--shadow-depth: applies to the egs policy only, and --policy does not include egs"
bad --policy egs,nosuch -- "--policy: unknown policy 'nosuch'"
bad --load 0.9,0.90 -- "--load: 0.90 is given twice"
bad --load trace,trace -- "--load: 'trace' is given twice"
bad --load 0 -- "--load: '0' must be 'trace' or a load in (0, 100)"
bad --load 0.9x -- "--load: '0.9x' is not a number"
bad --max-jobs 0 -- "--max-jobs: must be >= 1"
bad --seed -1 -- "--seed: '-1' is out of range (a whole number from 0 to 18446744073709551615)"
bad --lb-jobs 0 -- "--lb-jobs: must be >= 1"
bad --fair-share-age-limit 0 -- "--fair-share-age-limit: '0' must be hours in (0, 8760]"
bad --policy fifo,easy --fair-share-age-limit 4 -- "--fair-share-age-limit: applies to the egs policy only"
bad --lb-jobs 100 -- "--lb-jobs: sizes the lower bound's windows; give --lower-bound too"
bad --lb-windows 3 -- "--lb-windows: sizes the lower bound's windows; give --lower-bound too"
bad --reservation-depth 0 -- "--reservation-depth: '0' must be a whole number in [1, 1000000]"
bad --reservation-depth x -- "--reservation-depth: 'x' is not a number"
bad --shadow-depth 0 -- "--shadow-depth: '0' must be a whole number in [1, 1000000]"
bad --shadow-depth 2 --reservation-depth 2 -- "--shadow-depth: cannot be combined with --reservation-depth"
bad --bogus -- "unknown flag '--bogus'"
bad --share-nodes=yes -- "--share-nodes: takes no value"
bad --hard-quota=1 -- "--hard-quota: takes no value"
bad --bogus 1 -- "unknown flag '--bogus'"
bad --seed -- "--seed: missing value"
bad --fleet 0x8 -- "--fleet: fleet '0x8': N must be 1..1000000 (the number of nodes), not 0"
bad --fleet 99999999x8 -- "fleet '99999999x8': N must be 1..1000000 (the number of nodes), not 99999999"
bad --fleet "$work/absent.yaml" -- "--fleet: $work/absent.yaml: cannot open"
printf 'host,gpus\nh1,8\n' >"$work/hosts.csv"
bad --fleet "$work/hosts.csv" -- "--fleet: $work/hosts.csv:1: cannot tell the node list's format from its header"
printf 'shapes:\n  - {name: s8, gpuModel: H100, gpusPerNode: 8}\nclusters:\n  - {name: a, project: nosuch, pools: [{shape: s8, count: 2}]}\n' >"$work/bad.yaml"
bad --fleet "$work/bad.yaml" -- "--fleet: $work/bad.yaml:4:15: clusters[0].project"
bad --hard-quota -- "--hard-quota: trace '$trace' has no team quotas"
bad --load 0.5 --load 0.7 -- "--load: given twice"
bad --out --lower-bound -- "--out: missing value"
bad --fleet= -- "--fleet: empty value"
bad --load 1e-300 -- "--load 1e-300: rho: 1e-300 is too low"
bad --max-jobs 1 --load 0.9 -- "--load 0.9: trace 'trace': one job has no arrival gaps to rescale"
# Damaged trace files: each names the file, the line and the column.
head -1 "$trace" >"$work/header-only.csv"
bad --trace "$work/header-only.csv" -- "no job to replay (the file has no rows after its header)"
printf 'timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66,0,0,a\n' >"$work/zero-gpus.csv"
bad --trace "$work/zero-gpus.csv" -- "no job to replay (every row was skipped)"
printf 'job_id,num_gpu,submit_time,duration\n7,1,0,60\n7,2,30,60\n' >"$work/dup-id.csv"
bad --trace "$work/dup-id.csv" -- "dup-id.csv:3: column job_id: '7' is given twice (first on line 2)"
printf 'timestamp,duration,num_gpus,gpu_time,cluster\n0000-01-05 08:00:07,20,4,80,a\n' >"$work/year0.csv"
bad --trace "$work/year0.csv" -- "year0.csv:2: column timestamp"
printf 'sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,8,H100\nn0,1,1,8,H100\n' >"$work/dup-node.csv"
bad --fleet "$work/dup-node.csv" -- "dup-node.csv:3: column sn: 'n0' is given twice (first on line 2)"

# A good run: one policy, one load, the report and the per-request CSV. An earlier run's files
# in the same directory are removed; other files stay.
mkdir -p "$work/good"
touch "$work/good/jobs-easy-0.5.csv" "$work/good/wait-cdf-0.5.svg" "$work/good/notes.txt" \
  "$work/good/jobs-mine.csv" "$work/good/wait-cdf-draft.svg"
if ! "$sim" --trace "$trace" --fleet 4x8 --policy egs,fifo --load 0.9 --out "$work/good" \
    >"$work/stdout" 2>"$work/stderr"; then
  echo "FAIL: good run exited non-zero:" >&2
  cat "$work/stderr" >&2
  failures=$((failures + 1))
else
  for f in summary.json report.md jobs-egs-0.9.csv jobs-fifo-0.9.csv; do
    [[ -s $work/good/$f ]] || { echo "FAIL: good run wrote no $f" >&2; failures=$((failures + 1)); }
  done
  if [[ -e $work/good/jobs-easy-0.5.csv || -e $work/good/wait-cdf-0.5.svg || ! -e $work/good/notes.txt ||
    ! -e $work/good/jobs-mine.csv || ! -e $work/good/wait-cdf-draft.svg ]]; then
    echo "FAIL: good run: an earlier run's CSV/SVG left, or another file removed: $(ls "$work/good")" >&2
    failures=$((failures + 1))
  fi
  # Determinism: the same command and seed again gives byte-identical results (everything but
  # timing.json and report.md, which hold what the wall clock measured).
  [[ -s $work/good/timing.json ]] || { echo "FAIL: good run wrote no timing.json" >&2; failures=$((failures + 1)); }
  rm -rf "$work/first" && cp -r "$work/good" "$work/first"
  if ! "$sim" --trace "$trace" --fleet 4x8 --policy egs,fifo --load 0.9 --out "$work/good" \
      >"$work/stdout" 2>"$work/stderr"; then
    echo "FAIL: second good run exited non-zero" >&2
    failures=$((failures + 1))
  fi
  for f in "$work"/first/*; do
    name=$(basename "$f")
    [[ $name == timing.json || $name == report.md || $name == notes.txt ]] && continue
    cmp -s "$f" "$work/good/$name" ||
      { echo "FAIL: $name differs between two runs of the same command and seed" >&2; failures=$((failures + 1)); }
  done
fi

# A trace whose last job comes a year after the others: rescaling to a load warns about the gap.
printf 'job_id,num_gpu,submit_time,duration\n1,1,0,600\n2,2,60,600\n3,1,120,600\n4,4,31536000,600\n' \
  >"$work/outlier.csv"
if ! "$sim" --trace "$work/outlier.csv" --fleet 2x8 --policy fifo --load 0.5 --out "$work/outlier" \
    >"$work/stdout" 2>"$work/stderr"; then
  echo "FAIL: outlier run exited non-zero" >&2
  cat "$work/stderr" >&2
  failures=$((failures + 1))
elif ! grep -qF "warning: 100 % of the trace's submit window is one gap of 8760.0 h between jobs 3 and 4" "$work/stderr"; then
  echo "FAIL: outlier run did not warn about the gap:" >&2
  cat "$work/stderr" >&2
  failures=$((failures + 1))
fi

# A fleet of two clusters from an egsd fleet file, and the same nodes as an openb node list.
cat >"$work/fleet.yaml" <<'YAML'
projects: [{name: p}]
shapes:
  - {name: s8, gpuModel: H100, gpusPerNode: 8}
  - {name: s4, gpuModel: L40S, gpusPerNode: 4}
clusters:
  - {name: a, project: p, pools: [{shape: s8, count: 2}, {shape: s4, count: 2}]}
  - {name: b, project: p, pools: [{shape: s8, count: 2}]}
YAML
printf 'sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,8,H100\nn1,1,1,8,H100\nn2,1,1,4,L40S\n' \
  >"$work/nodes.csv"
for fleet in fleet.yaml nodes.csv; do
  if ! "$sim" --trace "$trace" --fleet "$work/$fleet" --policy egs --load 0.9 \
      --out "$work/fleet-$fleet" >"$work/stdout" 2>"$work/stderr"; then
    echo "FAIL: run on $fleet exited non-zero:" >&2
    cat "$work/stderr" >&2
    failures=$((failures + 1))
  fi
done
grep -qF "Fleet: $work/fleet.yaml: 6 nodes in 2 cluster(s) (40 GPUs)" "$work/fleet-fleet.yaml/report.md" ||
  { echo "FAIL: the fleet-file run's report does not describe its fleet" >&2; failures=$((failures + 1)); }
grep -qF "Fleet: $work/nodes.csv: 3 nodes (20 GPUs)" "$work/fleet-nodes.csv/report.md" ||
  { echo "FAIL: the node-list run's report does not describe its fleet" >&2; failures=$((failures + 1)); }

# An alibaba-spot job file (told apart by its header) on a node list of the same form, Spot jobs
# preemptible: every job is replayed, and HP (priority 300) jobs are reported as a class.
cat >"$work/spot-jobs.csv" <<'CSV'
job_name,organization,gpu_model,cpu_request,gpu_request,worker_num,submit_time,duration,job_type
1,7,A10,8,1,1,0,3600,Spot
2,7,A10,8,1,1,0,3600,Spot
3,9,A10,8,1,2,60,1800,HP
4,9,H800,8,1,16,120,600,HP
5,7,,8,0.5,1,180,300,Spot
CSV
printf 'gpu_model,gpu_capacity_num,cpu_num,node_name\nA10,1,64,0\nA10,1,64,1\nH800,8,128,2\nH800,8,128,3\n' \
  >"$work/spot-nodes.csv"
if ! "$sim" --trace "$work/spot-jobs.csv" --fleet "$work/spot-nodes.csv" --policy egs \
    --load trace --preemptible-below 1 --out "$work/spot" >"$work/stdout" 2>"$work/stderr"; then
  echo "FAIL: spot run exited non-zero:" >&2
  cat "$work/stderr" >&2
  failures=$((failures + 1))
elif ! grep -qF "spot-jobs.csv: 5 jobs" "$work/stderr" ||
    ! grep -qE '^\| egs \| 300 \| 2 \| 0.0 % \|' "$work/spot/report.md"; then
  echo "FAIL: spot run did not replay its 5 jobs with 2 HP jobs started:" >&2
  cat "$work/stderr" "$work/spot/report.md" >&2
  failures=$((failures + 1))
fi

# A Helios-style job log (told apart by its header) with a Helios GPU-number table as hard
# quotas: vcA's quota of 8 GPUs holds its second 8-GPU job until the first ends, though the
# fleet has room; vcB (16 GPUs) runs its two at once. CPU jobs and jobs never started are
# skipped and counted.
cat >"$work/cluster_log.csv" <<'CSV'
job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
1,u1,vcA,8,8,1,COMPLETED,2020-06-09 18:00:00,2020-06-09 18:00:00,2020-06-09 19:00:00,3600,0
2,u1,vcA,8,8,1,FAILED,2020-06-09 18:00:00,2020-06-09 18:00:00,2020-06-09 19:00:00,3600,0
3,u2,vcB,8,8,1,COMPLETED,2020-06-09 18:00:00,2020-06-09 18:00:00,2020-06-09 19:00:00,3600,0
4,u2,vcB,8,8,1,COMPLETED,2020-06-09 18:00:00,2020-06-09 18:00:00,2020-06-09 19:00:00,3600,0
5,u2,vcB,0,8,1,COMPLETED,2020-06-09 18:00:00,2020-06-09 18:00:00,2020-06-09 19:00:00,3600,0
6,u2,vcB,8,8,1,CANCELLED,2020-06-09 18:00:00,,,0,0
CSV
printf 'date,vcA,vcB,total\n2020-06-01,16,16,32\n2020-06-02,8,16,24\n' >"$work/gpu_number.csv"
rm -rf "$work/out"
"$sim" --trace "$work/cluster_log.csv" --out "$work/out" >"$work/stdout" 2>"$work/stderr"
refused $? "--fleet: required for a job log" "job log without --fleet"
bad --quotas "$work/gpu_number.csv" -- "--quotas: takes effect only with --hard-quota"
bad --hard-quota --quotas "$work/nodes.csv" -- "--quotas: $work/nodes.csv:1: cannot tell the quota table's format"
bad --hard-quota --quotas "$work/absent.csv" -- "--quotas: $work/absent.csv: cannot open"
if ! "$sim" --trace "$work/cluster_log.csv" --fleet 4x8 --policy egs --load trace --hard-quota \
    --quotas "$work/gpu_number.csv" --out "$work/helios" >"$work/stdout" 2>"$work/stderr"; then
  echo "FAIL: job-log run exited non-zero:" >&2
  cat "$work/stderr" >&2
  failures=$((failures + 1))
else
  csv=$work/helios/jobs-egs-trace.csv
  wait_of() { awk -F, -v id="$1" '$1 == id { print $13 }' "$csv"; }
  if ! grep -qF "cluster_log.csv: 4 jobs, skipped 1 (zero gpus), skipped 1 (never scheduled)" "$work/stderr" ||
      ! grep -qF "2 team quota(s), every one of the trace's 2 team(s) has one" "$work/stderr" ||
      [[ $(wait_of 1) != 0.000000 || $(wait_of 3) != 0.000000 || $(wait_of 4) != 0.000000 ||
        $(wait_of 2) != 3600.000000 ]]; then
    echo "FAIL: job-log run: want jobs 1, 3, 4 at once and job 2 after vcA's quota frees:" >&2
    cat "$work/stderr" "$csv" >&2
    failures=$((failures + 1))
  fi
fi

# Philly's original JSON job log (told apart by its opening '[') on its machine list (a 2-GPU
# and an 8-GPU machine): the 8-GPU job of two attempts runs from its first start to its last
# end (2 h); a job still running when the log was taken is skipped and counted.
cat >"$work/cluster_job_log" <<'JSON'
[{"status": "Pass", "vc": "vc1", "jobid": "a", "submitted_time": "2017-10-07 00:00:00", "user": "u",
  "attempts": [{"start_time": "2017-10-07 00:00:00", "end_time": "2017-10-07 00:30:00",
                "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7"]}]},
               {"start_time": "2017-10-07 00:40:00", "end_time": "2017-10-07 02:00:00",
                "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7"]}]}]},
 {"status": "Pass", "vc": "vc2", "jobid": "b", "submitted_time": "2017-10-07 00:10:00", "user": "u",
  "attempts": [{"start_time": "2017-10-07 00:10:00", "end_time": "2017-10-07 00:20:00",
                "detail": [{"ip": "m2", "gpus": ["gpu0", "gpu1"]}]}]},
 {"status": "Pass", "vc": "vc2", "jobid": "c", "submitted_time": "2017-10-07 00:20:00", "user": "u",
  "attempts": [{"start_time": "2017-10-07 00:20:00", "end_time": "None", "detail": [{"ip": "m2", "gpus": ["gpu0"]}]}]}]
JSON
printf 'machineId,number of GPUs,single GPU mem\nm1,8, 24GB\nm2,2, 12GB\n' >"$work/cluster_machine_list.csv"
printf '[{"vc": "a", "jobid": 7}]' >"$work/bad_job_log"
bad --trace "$work/bad_job_log" -- "bad_job_log: jobs[0].jobid: expected a string"
if ! "$sim" --trace "$work/cluster_job_log" --fleet "$work/cluster_machine_list.csv" --policy egs \
    --load trace --out "$work/philly-json" >"$work/stdout" 2>"$work/stderr"; then
  echo "FAIL: Philly JSON log run exited non-zero:" >&2
  cat "$work/stderr" >&2
  failures=$((failures + 1))
elif ! grep -qF "cluster_job_log: 2 jobs, skipped 1 (running at the end of the trace)" "$work/stderr" ||
    ! grep -qF "Fleet: $work/cluster_machine_list.csv: 2 nodes (10 GPUs)" "$work/philly-json/report.md" ||
    [[ $(awk -F, '$1 == "a" { print $7 }' "$work/philly-json/jobs-egs-trace.csv") != 7200.000000 ]]; then
  echo "FAIL: Philly JSON log run: want 2 jobs on 2 machines, job a holding 2 h:" >&2
  cat "$work/stderr" "$work/philly-json/jobs-egs-trace.csv" >&2
  failures=$((failures + 1))
fi

# Jobs that can never fit the fleet (8 GPUs on one 4-GPU node) are rejected, and said so.
if ! "$sim" --trace "$trace" --fleet 1x4 --policy egs --load 0.9 --out "$work/small" \
    >"$work/stdout" 2>"$work/stderr"; then
  echo "FAIL: small-fleet run exited non-zero" >&2
  failures=$((failures + 1))
elif ! grep -qE '^ +[0-9]+ of them rejected at submit: .*cannot hold 2 node' "$work/stderr"; then
  echo "FAIL: small-fleet run does not report its rejected jobs:" >&2
  cat "$work/stderr" >&2
  failures=$((failures + 1))
fi

finish egs-sim
