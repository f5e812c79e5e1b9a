#!/usr/bin/env python3
"""Writes the scenario traces (tests/scenarios/<name>/trace.csv) from fixed seeds.

The traces are synthetic, made here, in the Philly format that egs-sim reads (timestamp,
duration, num_gpus, gpu_time, cluster): submit time (UTC), hold in seconds, GPUs, GPU-seconds,
and the team. Run it again after changing a scenario below; the output is the same for the same
code (Python's random with a fixed seed), so `git diff` shows what a change did.
Usage: tests/scenarios/make_traces.py
"""
import datetime
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = datetime.datetime(2026, 1, 5, 8, 0, 0)


def lognormal_seconds(rng, median_s, sigma, low_s, high_s):
    return int(min(high_s, max(low_s, median_s * math.exp(rng.gauss(0, sigma)))))


def write(name, jobs):
    jobs.sort(key=lambda j: j[0])
    os.makedirs(os.path.join(HERE, name), exist_ok=True)
    with open(os.path.join(HERE, name, "trace.csv"), "w") as f:
        f.write("timestamp,duration,num_gpus,gpu_time,cluster\n")
        for submit_s, hold_s, gpus, team in jobs:
            t = T0 + datetime.timedelta(seconds=submit_s)
            f.write(f"{t:%Y-%m-%d %H:%M:%S},{hold_s},{gpus},{hold_s * gpus},{team}\n")


def poisson_arrivals(rng, rate_per_s, start_s, end_s):
    t = start_s
    while True:
        t += rng.expovariate(rate_per_s)
        if t >= end_s:
            return
        yield t


def burst_of_small_jobs():
    # 16 x 8 GPUs. Two teams keep the cluster about 60 % busy with 1-2 GPU jobs for 12 hours; at
    # hour 3 a third team submits 300 one-GPU jobs within 5 minutes (a sweep).
    rng = random.Random(101)
    jobs = []
    for team in ("alpha", "beta"):
        for t in poisson_arrivals(rng, 1 / 90.0, 0, 12 * 3600):
            jobs.append((int(t), lognormal_seconds(rng, 1800, 1.0, 60, 6 * 3600),
                         rng.choice((1, 1, 1, 2)), team))
    for _ in range(300):
        jobs.append((3 * 3600 + rng.randint(0, 300),
                     lognormal_seconds(rng, 1200, 0.6, 120, 3 * 3600), 1, "sweep"))
    write("burst-of-small-jobs", jobs)


def gangs_and_singles():
    # 32 x 8 GPUs, 24 hours: mostly 1-GPU jobs, a fifth whole-node jobs, a tenth 2- and 4-node
    # gangs. Long jobs book long, so backfill has gaps to fill in front of the gangs.
    rng = random.Random(202)
    jobs = []
    for t in poisson_arrivals(rng, 1 / 125.0, 0, 24 * 3600):
        u = rng.random()
        if u < 0.70:
            gpus, median = 1, 1800
        elif u < 0.90:
            gpus, median = 8, 3600
        else:
            gpus, median = rng.choice((16, 32)), 5400
        jobs.append((int(t), lognormal_seconds(rng, median, 1.1, 60, 20 * 3600), gpus,
                     rng.choice(("vision", "speech", "nlp", "rl"))))
    write("gangs-and-singles", jobs)


def quiet_cluster():
    # 8 x 8 GPUs at about 20 % load for 8 hours: nothing should wait.
    rng = random.Random(303)
    jobs = []
    for t in poisson_arrivals(rng, 1 / 240.0, 0, 8 * 3600):
        jobs.append((int(t), lognormal_seconds(rng, 1200, 0.8, 60, 4 * 3600),
                     rng.choice((1, 2, 4, 8)), "solo"))
    write("quiet-cluster", jobs)


def mixed_fleet():
    # 20 nodes of three sizes (nodes.csv: 8 x 1 GPU, 4 x 4 GPUs, 8 x 8 GPUs) for 12 hours, three
    # teams, jobs of 1-16 GPUs without a GPU model; expect.yaml rescales arrivals to load 0.8.
    # A job may use any node with room for it, so the one-GPU jobs are not held to the one-GPU
    # nodes.
    rng = random.Random(404)
    jobs = []
    for t in poisson_arrivals(rng, 1 / 60.0, 0, 12 * 3600):
        gpus = rng.choices((1, 2, 4, 8, 16), weights=(60, 10, 15, 10, 5))[0]
        jobs.append((int(t), lognormal_seconds(rng, 1800, 1.0, 60, 8 * 3600), gpus,
                     rng.choice(("red", "green", "blue"))))
    write("mixed-fleet", jobs)
    with open(os.path.join(HERE, "mixed-fleet", "nodes.csv"), "w") as f:
        f.write("sn,cpu_milli,memory_mib,gpu,model\n")
        for i in range(8):
            f.write(f"a10-{i},16000,65536,1,A10\n")
        for i in range(4):
            f.write(f"l40s-{i},64000,262144,4,L40S\n")
        for i in range(8):
            f.write(f"h100-{i},128000,1048576,8,H100\n")


if __name__ == "__main__":
    burst_of_small_jobs()
    gangs_and_singles()
    quiet_cluster()
    mixed_fleet()
