#!/bin/bash
# run.sh STEPS DELAY: print progress=NN% STEPS times, DELAY seconds apart.
set -euo pipefail

steps=$1
delay=$2
if ((steps < 1 || steps > 100)); then
  echo "progress-demo: steps is $steps; give 1 to 100" >&2
  exit 2
fi

for ((i = 1; i <= steps; i++)); do
  echo "progress=$((i * 100 / steps))%"
  sleep "$delay"
done
echo "done in $steps steps"
