import { resourcesOf, synth } from './helpers';

/** StartExecution's throttling reaches the nested-restore Task under the name the guide's rule
 * gives ("Learning to use AWS service SDK integrations": ServiceName.ErrorName, with the
 * Exception suffix; https://docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html),
 * the rule the loader itself applies to ExecutionLimitExceeded. ThrottlingException is one of the
 * Step Functions API's common errors (API reference, Common Errors). A drill whose StartExecution
 * is throttled once should not end in the Catch. */
describe('the drill\'s nested restore', () => {
  test('retries a throttled StartExecution (StepFunctions.ThrottlingException)', () => {
    const { template } = synth();
    const machine = Object.entries(resourcesOf(template, 'AWS::StepFunctions::StateMachine'))
      .find(([id]) => id.startsWith('DrillsWorkflowStateMachine'))![1];
    const doc = JSON.parse(String(machine.Properties.DefinitionString));
    const retried: string[] = (doc.States.Restore.Retry as Array<{ ErrorEquals: string[] }>).flatMap((r) => r.ErrorEquals);
    expect(retried).toContain('StepFunctions.ThrottlingException');
  });
});
