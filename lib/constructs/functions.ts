import * as path from 'path';
import { existsSync } from 'fs';
import { Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import { Construct } from 'constructs';
import { logGroupName, stackKey } from './encryption';
import { acknowledge, REASONS } from '../nag';
import { VOLUMES_OF_TAGGED_INSTANCE } from './permissions';

export const REPO_ROOT = path.join(__dirname, '..', '..');
export const DEPENDENCY_LAYER_DIR = path.join(REPO_ROOT, '.cache', 'lambda-layer');

export interface FunctionSpec {
  /** Construct id, e.g. `BackupPrepare`. */
  readonly id: string;
  /** Module under raidsnap.handlers, e.g. `backup_prepare`. */
  readonly module: string;
  readonly description: string;
  /** The IAM statements this function needs, and no others. */
  readonly statements: readonly iam.PolicyStatement[];
  readonly timeout?: Duration;
  readonly environment?: Record<string, string>;
}

/** Makes every raidsnap function the same way: one Python package as one asset, a handler
 * module per function, a log group each, Powertools from the public layer, pinned boto3 from
 * our own layer. */
export class FunctionFactory extends Construct {
  private readonly code: lambda.Code;
  private readonly layers: lambda.ILayerVersion[];
  private readonly environment: Record<string, string>;
  static readonly runtime = lambda.Runtime.PYTHON_3_13;
  static readonly architecture = lambda.Architecture.ARM_64;

  constructor(scope: Construct, id: string, props: { environment?: Record<string, string> } = {}) {
    super(scope, id);
    if (!existsSync(path.join(DEPENDENCY_LAYER_DIR, 'python'))) {
      throw new Error(
        `raidsnap: the Lambda dependency layer is missing (${DEPENDENCY_LAYER_DIR}); run scripts/setup.sh first`,
      );
    }
    // The published Powertools version moves: resolve the layer at deploy time.
    const powertoolsArn = ssm.StringParameter.valueForStringParameter(
      this, '/aws/service/powertools/python/arm64/python3.13/latest');
    this.layers = [
      new lambda.LayerVersion(this, 'Dependencies', {
        description: 'raidsnap: boto3 pinned so that CreateVolume knows VolumeInitializationRate',
        code: lambda.Code.fromAsset(DEPENDENCY_LAYER_DIR),
        compatibleRuntimes: [FunctionFactory.runtime],
        compatibleArchitectures: [FunctionFactory.architecture],
      }),
      lambda.LayerVersion.fromLayerVersionArn(this, 'Powertools', powertoolsArn),
    ];
    this.code = lambda.Code.fromAsset(path.join(REPO_ROOT, 'lambdas'), {
      exclude: ['*.toml', '*.txt', '**/__pycache__', '**/*.pyc', '.mypy_cache', '.ruff_cache'],
    });
    this.environment = {
      POWERTOOLS_SERVICE_NAME: 'raidsnap',
      POWERTOOLS_METRICS_NAMESPACE: 'raidsnap',
      POWERTOOLS_LOG_LEVEL: 'INFO',
      ...(props.environment ?? {}),
    };
  }

  create(scope: Construct, spec: FunctionSpec): lambda.Function {
    const logGroup = new logs.LogGroup(scope, `${spec.id}Logs`, {
      logGroupName: logGroupName(scope, 'functions', spec.id),
      retention: logs.RetentionDays.THREE_MONTHS,
      encryptionKey: stackKey(scope),
    });
    // An explicit role instead of AWSLambdaBasicExecutionRole: logs go to this function's own
    // log group only.
    const role = new iam.Role(scope, `${spec.id}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `raidsnap ${spec.id}: ${spec.description}`,
    });
    role.addToPolicy(new iam.PolicyStatement({
      actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
      resources: [logGroup.logGroupArn],
    }));
    const fn = new lambda.Function(scope, spec.id, {
      role,
      description: `raidsnap: ${spec.description}`,
      runtime: FunctionFactory.runtime,
      architecture: FunctionFactory.architecture,
      handler: `raidsnap.handlers.${spec.module}.handler`,
      code: this.code,
      layers: this.layers,
      timeout: spec.timeout ?? Duration.seconds(60),
      memorySize: 256,
      tracing: lambda.Tracing.ACTIVE,
      logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      environment: { ...this.environment, ...(spec.environment ?? {}) },
    });
    for (const statement of spec.statements) fn.addToRolePolicy(statement);
    acknowledge(fn, 'AwsSolutions-L1', REASONS.runtime);
    acknowledgePolicyFindings(role, spec.statements);
    return fn;
  }

  createAll(scope: Construct, specs: readonly FunctionSpec[]): Record<string, lambda.Function> {
    return Object.fromEntries(specs.map((spec) => [spec.id, this.create(scope, spec)]));
  }
}

/** The wildcard resources a function's statements name, each acknowledged for what limits it. */
function acknowledgePolicyFindings(role: iam.Role, statements: readonly iam.PolicyStatement[]): void {
  const policy = role.node.tryFindChild('DefaultPolicy');
  if (!policy) return;
  const seen = new Set<string>(['*']);
  acknowledge(policy, 'AwsSolutions-IAM5[Resource::*]', REASONS.describe);
  for (const statement of statements) {
    const json = statement.toStatementJson() as { Resource?: unknown; Condition?: unknown; Sid?: string };
    const resources = ([] as unknown[]).concat(json.Resource ?? []);
    for (const resource of resources) {
      if (typeof resource !== 'string' || !resource.endsWith('/*') || seen.has(resource)) continue;
      const byInstance = json.Sid === VOLUMES_OF_TAGGED_INSTANCE;
      if (!json.Condition && !byInstance) {
        throw new Error(`raidsnap: ${role.node.path}: ${resource} without a condition`);
      }
      seen.add(resource);
      const pattern = resource
        .replace(/\$\{Token\[AWS\.Partition\.\d+\]\}/, '<AWS::Partition>')
        .replace(/\$\{Token\[AWS\.Region\.\d+\]\}/, '<AWS::Region>')
        .replace(/\$\{Token\[AWS\.AccountId\.\d+\]\}/, '<AWS::AccountId>');
      const kind = byInstance ? REASONS.snapshotVolumes
        : resource.includes(':instance/') ? REASONS.instances
          : resource.includes('::snapshot/') ? REASONS.snapshots : REASONS.volumes;
      acknowledge(policy, `AwsSolutions-IAM5[Resource::${pattern}]`, kind);
    }
  }
}
