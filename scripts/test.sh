#!/usr/bin/env bash
# Every check raidsnap has, in one command; installs what it needs first (scripts/setup.sh and,
# for the VM suite, scripts/vm/ensure.sh). Safe to run twice. Ends with one summary line.
#
# After the setup and the synth that everything else reads, three parts run at once
# (scripts/test-part.sh: checks, pytest, vm), each into a log of its own; each log is printed
# whole as its part ends, so no two parts' lines mix. The exit status fails if any part failed.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
results=.cache/test-results
logs=$results/logs
rm -rf "$results" && mkdir -p "$logs"

step "setup"
scripts/setup.sh

step "cdk synth (no config, and the example config)"
# Before the parts: cfn-lint and checkov read both templates, and the Python and VM suites would
# otherwise each synthesize what they read.
rm -rf cdk.out cdk.out.example
node_modules/.bin/cdk synth --quiet -o cdk.out >/dev/null
node_modules/.bin/cdk synth --quiet -o cdk.out.example -c config=config/example.yaml >/dev/null

parts=(vm pytest checks)
declare -A part_of=()
for part in "${parts[@]}"; do
  # The VM suite is the longest part and its guests run against timeouts: the others yield to it.
  priority=10
  [[ $part == vm ]] && priority=0
  nice -n "$priority" scripts/test-part.sh "$part" "$results" >"$logs/$part.log" 2>&1 &
  part_of[$!]=$part
done
step "running at once: ${parts[*]} (logs in $logs, each printed whole when it ends)"

failed=()
while ((${#part_of[@]})); do
  rc=0
  wait -n -p pid "${!part_of[@]}" || rc=$?
  part=${part_of[$pid]}
  unset "part_of[$pid]"
  cat "$logs/$part.log"
  ((rc == 0)) || failed+=("$part")
done

step "summary"
# A part can fail without a failed test (a type error, a lint finding): named before the count.
((${#failed[@]} == 0)) || echo "parts that failed: ${failed[*]}"
summary_rc=0
.venv/bin/python scripts/summarize.py "$results" || summary_rc=$?
((${#failed[@]} == 0)) || exit 1
exit "$summary_rc"
