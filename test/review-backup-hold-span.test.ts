/**
 * Review of fix25a: a backup's hold against restores (lambdas/raidsnap/workflows/backup/
 * prepare.py _hold_seconds) lasts discovery + the freeze + SNAPSHOT_STEP_SECONDS, the snapshot
 * step's worst case with the Retry it is deployed with. The hold is written by Prepare; the
 * steps between Prepare and TakeSnapshotSet (ResolveMembers: DescribeInstances and
 * DescribeVolumes, the calls a fleet throttles most per the README; Freeze: ssm:SendCommand;
 * PollFreeze) carry the same Retry (LAMBDA_RETRY: 40 ThrottledError attempts up to 300 s apart)
 * and nothing renews the hold after Prepare. Throttled there, the backup is still RUNNING with
 * its snapshots not taken when its lease runs out: lock.backup_holds drops a lease that ran out
 * before refuse_while_backup_holds asks whether the backup runs, so a replace-mode restore is let
 * in and replaces the members under a backup that then snapshots them.
 *
 * AWS sources: Step Functions developer guide, "Handling errors in Step Functions workflows"
 * (Retry: each retrier counts its own attempts; with JitterStrategy FULL a wait is random
 * between 0 and IntervalSeconds x BackoffRate^(n-1), capped by MaxDelaySeconds); "Request
 * throttling for the Amazon EC2 API" (RequestLimitExceeded while an action's bucket is empty).
 */
import { worstCaseRetrySeconds } from '../lib/constructs/workflow';
import { resourcesOf, synth } from './helpers';

describe('a backup\'s hold against restores', () => {
  const { template } = synth();
  const machines = Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine'));
  const backup = machines.find((m) => String(m.Properties.DefinitionString).includes('raidsnap backup:'))!;
  const states = JSON.parse(backup.Properties.DefinitionString).States;
  const functions = resourcesOf(template, 'AWS::Lambda::Function');
  const timeoutOf = (state: string): number => {
    const placeholder = /^\$\{(.+)\}$/.exec(states[state].Resource)![1];
    const id = backup.Properties.DefinitionSubstitutions[placeholder]['Fn::GetAtt'][0];
    return Number(functions[id].Properties.Timeout ?? 3);
  };
  const prepare = Object.values(functions).find((f) => f.Properties.Handler === 'raidsnap.handlers.backup_prepare.handler')!;
  const env = prepare.Properties.Environment.Variables;
  const lease = Number(env.DISCOVERY_TIMEOUT_SECONDS ?? 90) + Number(env.MAX_FREEZE_SECONDS ?? 60) + Number(env.SNAPSHOT_STEP_SECONDS);

  test('lasts until the snapshot step has run, whatever the steps before it were retried', () => {
    const between = ['ResolveMembers', 'Freeze', 'PollFreeze', 'TakeSnapshotSet'];
    const worst = Object.fromEntries(between.map((s) => [s, worstCaseRetrySeconds(states[s].Retry, timeoutOf(s))]));
    const total = Object.values(worst).reduce((a, b) => a + b, 0);
    // Seen: a lease of 13,611 s (3.8 h) against up to 53,844 s of retries from Prepare to the
    // snapshot step (each of the four steps up to 3.7 h)
    expect({ lease, worst, total: lease >= total ? 'covered' : total }).toEqual({ lease, worst, total: 'covered' });
  });
});
