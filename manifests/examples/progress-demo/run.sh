#!/bin/sh
# run.sh STEPS DELAY: print progress=NN% STEPS times, DELAY seconds apart.
# POSIX sh (dash): bash looks the user up and probes the terminal as it
# starts, which the sandbox refuses, and reports, on every run.
set -eu

steps=$1
delay=$2
if [ "$steps" -lt 1 ] || [ "$steps" -gt 100 ]; then
  echo "progress-demo: steps is $steps; give 1 to 100" >&2
  exit 2
fi

i=1
while [ "$i" -le "$steps" ]; do
  echo "progress=$((i * 100 / steps))%"
  sleep "$delay"
  i=$((i + 1))
done
echo "done in $steps steps"
