#!/usr/bin/env bash
# Run many `fedprivacy reproduce` runs concurrently on one CUDA machine (how Table 4 was run).
#
# usage: experiments/device/run_jobs.sh JOBFILE OUT_DIR SECONDS [PARALLEL]
#   JOBFILE: one run per line, "EXPERIMENT RUN SEED LR" (e.g. "table4-mnist-iid random 0 0.1").
#   Each run goes to OUT_DIR/lrLR/EXPERIMENT/RUN-seedSEED with device=cuda, encoding=float (the
#   exact weighted mean; the fixed-point encoding costs more than a GPU round) and metrics=none
#   (T_weak is computed afterwards with `fedprivacy audit` on participation.csv).
#   Runs still going after SECONDS are stopped; their logs say how far they got.
# Needs FEDPRIVACY_DATA (a folder with mnist/) and fedprivacy importable by python3.
set -u
# A dry run on a CPU: DEVICE=cpu EXTRA="--set rounds=2" PY=.venv/bin/python run_jobs.sh ...
jobs=$1 out=$2 limit=$3 par=${4:-12}
mkdir -p "$out/logs"
export DEVICE=${DEVICE:-cuda} EXTRA=${EXTRA:-} PY=${PY:-python3}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 out
run_one() {
  local exp=$1 run=$2 seed=$3 lr=$4
  # shellcheck disable=SC2086  # EXTRA is a list of options
  $PY -m fedprivacy.cli.main reproduce "$exp" --only "$run" --seeds "$seed" \
    --out "$out/lr$lr" --set "local_lr=$lr" --set "device=$DEVICE" --set encoding=float \
    --set metrics=none --set checkpoint_every=50 $EXTRA --quiet \
    > "$out/logs/$exp-$run-s$seed-lr$lr.log" 2>&1
  echo "$(date +%T) rc=$? $exp $run seed $seed lr $lr"
}
export -f run_one
started=$(date +%s)
grep -v '^#' "$jobs" | grep . | timeout "$limit" xargs -P "$par" -L 1 bash -c 'run_one "$@"' _
pkill -f -- "--out $out/lr" || true  # only this script's runs
echo "jobs done or stopped after $(( $(date +%s) - started )) s"
