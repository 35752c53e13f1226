#!/usr/bin/env bash
# One device call of issue 34 (2026-11-26, 27): the batched ULDP round on a GPU, then 200-round curves.
#   1. benchmarks/uldp.py --device cuda, part 2 (the whole round: per-silo, vmap and bmm at two
#      chunk sizes, a profile of the last), alone on the GPU; the fastest engine (gradient and
#      max_rows) is used for the curves;
#   2. Fig. 9b and Fig. 5 (e, d, f) curves at the paper's 200 rounds, one process per curve
#      (uldp_200_jobs.txt, in its order), PARALLEL at a time, into one --out per figure, and the
#      global learning-rate sweep (fedprivacy uldp, same file); curves still running at the
#      deadline are stopped (a finished curve leaves PANEL-CURVE.json, which a later
#      `fedprivacy reproduce uldp-figN --out DIR` reuses instead of training).
# Needs the wheels in .whl/ and mnist/ in .devdata/ (carried, see README.md).
# usage: uldp_round_gpu.sh SECONDS [PARALLEL] [BENCH_SECONDS]; results in $OUT/results.tar.gz
# A dry run on a CPU: DEVICE=cpu ROUNDS=1 PY=.venv/bin/python JOBS=FILE OUT=DIR uldp_round_gpu.sh ...
set -u
limit=${1:-540} par=${2:-6} bench_limit=${3:-150}
export DEVICE=${DEVICE:-cuda} ROUNDS=${ROUNDS:-200} PY=${PY:-python3}
jobs=${JOBS:-experiments/device/uldp_200_jobs.txt}
start=$(date +%s)
if [ "$DEVICE" = cuda ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  nvidia-smi --query-gpu=name,memory.total --format=csv
fi
export PYTHONPATH=/tmp/site:$PWD/src FEDPRIVACY_DATA=$PWD/.devdata PYTHONUNBUFFERED=1
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
res=/tmp/res-$$; mkdir -p "$res/logs" "$res/runs"
$PY -c "import fedprivacy.cli.main, dp_accounting, opacus, gmpy2, flint, torch; print('imports ok', torch.__version__, torch.cuda.is_available())" || exit 1
bench=$res/logs/bench-uldp.log
timeout "$bench_limit" $PY benchmarks/uldp.py --device "$DEVICE" --skip-silos \
  --users "${USERS:-10000}" --max-rows 4096,16384 --gradients vmap,bmm --repeats "${REPEATS:-2}" \
  --peak-tflops 67 --profile > "$bench" 2>&1
echo "benchmark rc=$? after $(( $(date +%s) - start )) s"; cat "$bench"
# the fastest engine (gradient, chunk size) of the table; vmap with 4096 rows if none finished
best=$(awk -F'|' '/^ *(vmap|bmm) \([0-9]+ rows\)/ {n=$1; g=$1; gsub(/[^0-9]/, "", n);
  sub(/^ +/, "", g); sub(/ .*/, "", g); print $2, g, n}' "$bench" | sort -n | head -1)
grad=$(echo "$best" | awk '{print $2}'); rows=$(echo "$best" | awk '{print $3}')
grad=${grad:-vmap} rows=${rows:-4096}
echo "engine for the curves: gradient $grad, max_rows $rows"
run_one() {  # KIND ARGS...: "fig FIGURE PANEL:CURVE" or "lr METHOD GLOBAL_LR"
  local kind=$1; shift
  if [ "$kind" = fig ]; then
    $PY -m fedprivacy.cli.main reproduce "$1" --only "$2" --rounds "$ROUNDS" \
      --out "$res/runs/$1" --set "device=$DEVICE" --set "max_rows=$rows" --set "gradient=$grad" \
      > "$res/logs/$1-${2/:/-}.log" 2>&1
  else
    $PY -m fedprivacy.cli.main uldp --dataset mnist --users 10000 --distribution zipf \
      --method "$1" --global-lr "$2" --rounds "$ROUNDS" --device "$DEVICE" --max-rows "$rows" \
      --gradient "$grad" \
      --quiet --out "$res/runs/lr/$1-eta$2" > "$res/logs/lr-$1-eta$2.log" 2>&1
  fi
  echo "$(date +%T) rc=$? $kind $*"
}
export -f run_one; export res rows grad
left=$(( limit - ($(date +%s) - start) - 20 ))
grep -v '^#' "$jobs" | grep . | \
  timeout "$left" xargs -P "$par" -L 1 bash -c 'run_one "$@"' _ > "$res/logs/jobs.log" 2>&1
pkill -f "fedprivacy.cli.main (reproduce|uldp) .*$res" || true; sleep 2
echo "stopped after $(( $(date +%s) - start )) s"; cat "$res/logs/jobs.log"
ls "$res"/runs/*/ | head -80
tar czf "$OUT/results.tar.gz" -C "$res" .
