#!/usr/bin/env bash
# raidsnap's main job on the local AWS emulation: installs what it needs, synthesizes the app,
# then runs a backup (its set copied to a second Region), a member failure and its recovery, a
# drill, a restore whose prewarm fails after assembly (the array stays mounted), and last the
# array restored in the second Region from its copied set. No AWS account, no Docker.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
node_modules/.bin/cdk synth --quiet >/dev/null
# Functions log warnings and errors only, so the timeline stays readable.
export POWERTOOLS_LOG_LEVEL=WARNING POWERTOOLS_METRICS_DISABLED=true
exec .venv/bin/python -m raidsnap_emulation.demo
