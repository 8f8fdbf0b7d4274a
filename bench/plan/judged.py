#!/usr/bin/env python3
"""judged.py - runs a command and judges whether the machine was busy with other work while it ran.

    bench/plan/judged.py RECORD -- COMMAND [ARGS...]

Runs COMMAND, then appends one line to RECORD: "under_load others_pct steal_pct", where others_pct is the
share of all CPUs' time that processes other than COMMAND, its descendants and this script took (the host's busy time from
/proc/stat less the command's CPU time), steal_pct the hypervisor's steal over the run, and under_load 1 when
others_pct > 10 or steal_pct > 5 (tandem ab's load judge: TDM_AB_OTHERS_PCT, TDM_AB_STEAL_PCT). Exits with
COMMAND's status. The command's CPU time is its children's rusage, which covers the MPI ranks that mpirun
waits for.
"""
import os
import resource
import subprocess
import sys

OTHERS_PCT, STEAL_PCT = 10.0, 5.0


def cpu_ticks():
    """(total, busy, steal) ticks of all CPUs: busy is user + nice + system, as tandem ab counts it."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v), v[0] + v[1] + v[2], v[7] if len(v) > 7 else 0


def job_cpu_s():
    """The command's CPU time (its children's rusage) and this script's own."""
    total = 0.0
    for who in (resource.RUSAGE_CHILDREN, resource.RUSAGE_SELF):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("judged.py: expected RECORD -- COMMAND [ARGS...]")
    record, cmd = argv[1], argv[3:]
    hz = os.sysconf("SC_CLK_TCK")
    t0, b0, s0 = cpu_ticks()
    c0 = job_cpu_s()
    try:
        rc = subprocess.call(cmd)
    except OSError as e:
        sys.exit(f"judged.py: cannot run {cmd[0]}: {e.strerror}")
    t1, b1, s1 = cpu_ticks()
    job = job_cpu_s() - c0
    span = max(t1 - t0, 1)
    # the ticks are sampled: a few either way, so a share below zero is none
    others = max(0.0, 100.0 * ((b1 - b0) - job * hz) / span)
    steal = 100.0 * (s1 - s0) / span
    with open(record, "a") as f:
        f.write("%d %.1f %.1f\n" % (others > OTHERS_PCT or steal > STEAL_PCT, others, steal))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
