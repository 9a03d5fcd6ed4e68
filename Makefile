# The two commands of the README, and a few conveniences around them.
.PHONY: demo test setup synth bench sim clean

demo: ## a backup copied to a second Region, the loss of a member, restores, on the local AWS emulation
	@scripts/demo.sh

test: ## every check: types, lint, shellcheck, synth + cfn-lint, jest, pytest, the QEMU VM suite
	@scripts/test.sh

setup: ## node packages, .venv (with the raidsnap command) and the Lambda dependency layer
	@scripts/setup.sh

synth:
	@scripts/setup.sh && node_modules/.bin/cdk synth --quiet

bench: ## restore time, state transitions and a 1,000-array fleet on the emulation, and prewarm throughput in the VM
	@scripts/setup.sh && .venv/bin/python bench/restore_time.py && .venv/bin/python bench/recovery_time.py && .venv/bin/python bench/transitions.py && .venv/bin/python bench/fleet.py && bench/prewarm.sh

sim: ## thirty simulated days of backups with faults, retention and the sweeper; prints its figures
	@scripts/setup.sh && .venv/bin/python -m pytest test/sim -q -s -p no:cacheprovider

clean:
	rm -rf cdk.out cdk.out.example .cache/test-results
