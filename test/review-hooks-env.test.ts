import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { ConfigError, parseConfig } from '../lib/config';
import { RaidsnapStack } from '../lib/raidsnap-stack';

// Review of issue 24: HOOKS_BY_ARRAY carries every array's hooks and named commands (up to 8
// commands of up to 2,000 characters each, per array) in the backup functions' environment.
// Lambda: "Total size of environment variables set | 4 KB" (Lambda quotas,
// https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html); a larger set is
// refused by CreateFunction/UpdateFunctionConfiguration, so a config that parseConfig accepts
// fails only at deploy (and an update of the config file would fail the stack update). Either the
// config is refused by name at synth, or every function's environment fits.
describe('review: hooks in the Lambda environment', () => {
  test('a configuration parseConfig accepts fits in every function\'s 4 KB environment', () => {
    const arg = 'x'.repeat(99);
    const command = `/usr/local/sbin/db-hook ${arg} ${arg} ${arg}`; // 324 characters, valid
    const commands = Object.fromEntries(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((n) => [`cmd-${n}`, command]));
    const raw = { arrays: { db1: { hooks: { commands } }, db2: { hooks: { commands } } } };
    let config;
    try {
      config = parseConfig(raw);
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError); // refused at synth, by name: fine
      return;
    }
    const app = new App({ context: { 'aws:cdk:disable-asset-staging': true } });
    const stack = new RaidsnapStack(app, 'raidsnap', { config, env: { account: '123456789012', region: 'eu-west-1' } });
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
