import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { stackKey } from './encryption';
import { lockTableStatements } from './restore-workflow';

/** The manifest of every snapshot set: which snapshot is which slot of the set, recorded by the
 * backup when it takes the set. Retention deletes only recorded snapshots, and only recorded,
 * complete sets are restored; the backup's snapshot function alone may write an item. The
 * table outlives the stack, as the snapshots it describes do. */
export class SnapshotSets extends Construct {
  readonly table: dynamodb.Table;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: 'array', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'setId', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED,
      encryptionKey: stackKey(this),
      deletionProtection: true,
      // Without its manifest a set is never restored as latest: keep them with the snapshots.
      removalPolicy: RemovalPolicy.RETAIN,
    });
  }

  /** Item access on this table only, and use of its key through DynamoDB only. */
  statements(...actions: string[]): iam.PolicyStatement[] {
    return lockTableStatements(this.table, actions);
  }
}
