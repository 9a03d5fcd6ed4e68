"""The per-deployment secret in every run's nonce.

A run's nonce (raidsnap:restore-run, and part of every ClientToken) tells its volumes from those
of an earlier execution of the same name. Made of the execution ARN and start time alone, anyone
allowed states:DescribeExecution could compute it and tag a volume of their own as the run's. So
it is an HMAC (RFC 2104) of the ARN and start time under a secret of this deployment.

Where the secret lives, of the two AWS offers for this:
- A Secrets Manager secret that CloudFormation generates (AWS::SecretsManager::Secret
  GenerateSecretString: a random string no template or person ever sees), read with
  GetSecretValue by the functions granted it, on that secret's ARN only. $0.40 per secret per
  month and $0.05 per 10,000 API calls (AWS Secrets Manager pricing); the functions read it once
  per invocation that needs a nonce.
- An HMAC KMS key (KeySpec HMAC_256, KeyUsage GENERATE_VERIFY_MAC) with kms:GenerateMac: the key
  material never leaves KMS ("HMAC keys in AWS KMS", Key Management Service Developer Guide),
  at $1 per key per month plus requests, and a key policy to keep in step with the grants.
The secret is chosen: it is cheaper, needs no key policy beside the stack's, and the
functions that read it (Prepare, the cleanup after a stop, the sweeper, a drill's teardown) are
the ones that already may delete this workflow's volumes, so holding the value gives them no
power they lack. Never rotated: a new value would change the nonce of every run in flight, and
their cleanups could no longer name their volumes.
"""

from __future__ import annotations

from datetime import datetime

from raidsnap import clients
from raidsnap.environment import run_nonce_secret
from raidsnap.plan.volumes import run_nonce


def secret() -> bytes:
    """The deployment's secret (GetSecretValue of RUN_NONCE_SECRET)."""
    answer = clients.secretsmanager().get_secret_value(SecretId=run_nonce_secret())
    return str(answer["SecretString"]).encode()


def nonce(execution_arn: str, start: str | int | datetime) -> str:
    """The nonce of the run of ``execution_arn`` that started at ``start``."""
    return run_nonce(execution_arn, start, secret())
