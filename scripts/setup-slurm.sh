#!/usr/bin/env bash
# Installs a single-node Slurm cluster's programs for the job-array test
# (cmd/pipe TestSlurmJobArray): Debian's slurm-wlm (slurmctld, slurmd, sbatch,
# scancel, scontrol) and munge (the authentication daemon Slurm requires).
# Only installs: the test itself writes slurm.conf into a temporary directory
# and starts munged, slurmctld and slurmd by hand (no systemd here), so nothing
# here runs as a service and nothing outside the test's directory is changed
# except the munge key Debian's package creates.
# Idempotent: nothing is fetched when the programs are already there.
set -euo pipefail
need=(sbatch scontrol scancel slurmctld slurmd munged)
missing=0
for p in "${need[@]}"; do
  command -v "$p" >/dev/null 2>&1 || { [ -x "/usr/sbin/$p" ] || missing=1; }
done
if [ "$missing" = 0 ]; then
  echo "setup-slurm: slurm-wlm and munge are installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "setup-slurm: slurm-wlm and munge are missing and installing them needs root (apt-get install slurm-wlm munge)" >&2
  exit 1
fi
echo "setup-slurm: installing slurm-wlm and munge with apt-get"
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
# Package scripts try to start services; with no init system they must not fail the install.
apt-get update -qq
apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
echo "setup-slurm: installed in $(( $(date +%s) - start ))s"
