#!/bin/bash
# Quiet-machine timings: the README's CI example (a cold cache, then twice with the run cached) and the main job,
# each in a fresh directory beside the shared data, with the load average before each command.
#   bash benchmarks/ci_gate_timings.sh [SCRATCH_DIR]     (run from the repository; needs ../shared beside it)
set -u
REPO=$(pwd)
SCRATCH=${1:-$(mktemp -d)}
SHARED=$(cd ../shared && pwd)
cd "$SCRATCH"
rm -rf work cache; mkdir work; cd work
ln -s "$REPO/.venv" .venv
ln -sfn "$SHARED" ../shared
export TOPICAUDIT_CACHE_DIR="$SCRATCH/cache"
cat > privacy.toml <<'T'
[corpus]
path = "../shared/data/pheme/pheme_clean.json"
preprocess = false
[target]
learner = "dp-cgs"       # claims ε = 3
k = 5
vocabulary = "all"
[attack]
shadows = 0              # canaries only: one fit, no Ray
T
for i in 1 2 3; do
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -f "ci-example run $i (cache $( [ $i = 1 ] && echo cold || echo warm )): %e s wall, %U+%S s CPU" .venv/bin/topicaudit check privacy.toml --canaries auto --budget 60 --junit privacy-check.xml > out$i.txt 2>&1; echo "exit $?"
  grep -h "^CONSISTENT\|^VIOLATED\|reusing" out$i.txt | cut -c1-100
  grep -h "wall" out$i.txt | tail -1
done
for i in 1 2 3; do
  rm -rf runs
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -f "main job run $i: %e s wall, %U+%S s CPU" .venv/bin/topicaudit run --quiet > demo$i.txt 2>&1; echo "exit $?"; grep -h "main job" demo$i.txt
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
