import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { ConfigError, parseConfig } from '../lib/config';
import { RaidsnapStack } from '../lib/raidsnap-stack';

// Review (second) of issue 24: the fix refuses hooks over 2,048 bytes of HOOKS_BY_ARRAY
// (lib/hooks-config.ts, checkHooksFit: "The hooks may take half of it; the other variables
// (document names, retention and copy targets per array) keep the rest"), but nothing checks
// that the rest fits: COPIES_BY_ARRAY carries, per copy, a state machine ARN, a role ARN and a
// key ARN. Lambda: "Total size of environment variables set | 4 KB" (Lambda quotas,
// https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html); CreateFunction and
// UpdateFunctionConfiguration refuse more, so two arrays with hooks under the budget and copies
// to three places each in a backup account (about 4.9 KB) pass parseConfig and synth and fail at deploy (or
// fail the stack update that added a copy). Either the configuration is refused by name at
// synth, or every function's environment fits.
describe('review: hooks and copies together in the Lambda environment', () => {
  test('hooks under their budget and a few copies fit in every function\'s 4 KB environment', () => {
    const arg = 'x'.repeat(99);
    const command = `/usr/local/sbin/db-hook ${arg} ${arg}`; // 223 characters, a valid hook
    // 8 commands: 1,935 bytes of HOOKS_BY_ARRAY, under the 2,048 the hooks may take
    const commands = Object.fromEntries(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((n) => [`cmd-${n}`, command]));
    const copies = ['us-west-2', 'eu-central-1', 'ap-southeast-2'].map((region) => ({
      region,
      account: '222233334444',
      roleArn: 'arn:aws:iam::222233334444:role/raidsnap-copy-requests',
      kmsKeyArn: `arn:aws:kms:${region}:222233334444:key/1234abcd-12ab-34cd-56ef-1234567890ab`,
      retention: 30,
    }));
    const raw = {
      arrays: {
        db1: { hooks: { commands }, copies },
        logs: { copies },
      },
    };
    let config;
    try {
      config = parseConfig(raw);
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError); // refused at synth, by name: fine
      return;
    }
    const app = new App({ context: { 'aws:cdk:disable-asset-staging': true } });
    let stack;
    try {
      stack = new RaidsnapStack(app, 'raidsnap', { config, env: { account: '123456789012', region: 'eu-west-1' } });
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      return;
    }
    const functions = Template.fromStack(stack).findResources('AWS::Lambda::Function');
    const tooBig: string[] = [];
    for (const [id, fn] of Object.entries(functions)) {
      const vars: Record<string, unknown> = fn.Properties?.Environment?.Variables ?? {};
      // Tokens (Refs, GetAtts) resolve to ARNs/names; count their JSON as a lower bound.
      const size = Object.entries(vars).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(typeof v === 'string' ? v : JSON.stringify(v)), 0);
      if (size > 4096) tooBig.push(`${id}: ${size} bytes`);
    }
    expect(tooBig).toEqual([]);
  });
});
