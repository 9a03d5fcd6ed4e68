#!/usr/bin/env node
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { loadConfig } from '../lib/config';
import { RaidsnapStack } from '../lib/raidsnap-stack';

const app = new App();
const configPath = app.node.tryGetContext('config') as string | undefined;
const stackName = (app.node.tryGetContext('stackName') as string | undefined) ?? 'raidsnap';
new RaidsnapStack(app, stackName, {
  config: loadConfig(configPath),
  description: 'raidsnap: crash-consistent snapshot sets and fast restores of mdadm arrays on EBS',
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
