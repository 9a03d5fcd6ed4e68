#!/usr/bin/env node
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ConfigError, loadConfig } from '../lib/config';
import { RaidsnapStack } from '../lib/raidsnap-stack';

const app = new App();
const configPath = app.node.tryGetContext('config') as string | undefined;
const stackName = (app.node.tryGetContext('stackName') as string | undefined) ?? 'raidsnap';
try {
  new RaidsnapStack(app, stackName, {
    config: loadConfig(configPath),
    description: 'raidsnap: crash-consistent snapshot sets and fast restores of mdadm arrays on EBS',
  });
} catch (err) {
  // A config mistake is the operator's to fix: one line saying where and how, no stack trace.
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`${err.line(err.file ?? configPath)}\n`);
  process.exit(1);
}
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
