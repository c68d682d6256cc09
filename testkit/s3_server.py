"""A real S3 API on loopback for the object-storage readers' tests and bench: moto's server in
a child process, with IAM enforced, so that a wrong key or a missing permission is refused
by the server as S3 refuses it.

`s3_server()` starts `python -m moto.server` on a free 127.0.0.1 port with
`INITIAL_NO_AUTH_ACTION_COUNT` set to the IAM calls that create its users (every later request
is authenticated and authorised), creates three users: `admin` (every action; uploads),
`reader` (s3:GetObject and s3:ListBucket, plus the names moto checks where AWS checks
those two: s3:HeadObject on a HEAD, s3:ListObjectsV2 on a listing) and `nobody` (no
policy), and yields an `S3Server` that knows their keys, uploads objects and gives the
environment variables a client reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from planner.loadtest.netutil import free_port

REGION = "us-east-1"
READER_ACTIONS = ["s3:GetObject", "s3:HeadObject", "s3:ListBucket", "s3:ListObjectsV2"]
_SETUP_CALLS = 8  # the IAM calls _users makes before authentication starts


@dataclass(frozen=True)
class S3Server:
    """A running loopback S3: its endpoint and each user's (access key id, secret)."""

    endpoint: str
    keys: dict[str, tuple[str, str]]

    def env(self, user: str = "reader") -> dict[str, str]:
        """The environment a client of this server reads, as `user`."""
        key_id, secret = self.keys.get(user, (user, "wrong-secret"))
        return {
            "AWS_ACCESS_KEY_ID": key_id,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self, user: str = "admin") -> Any:
        import boto3

        key_id, secret = self.keys[user]
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
        )

    def _bucket(self, bucket: str) -> Any:
        """An admin client, with `bucket` created if it was not."""
        s3 = self.client()
        with suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=bucket)
        return s3

    def put(self, bucket: str, key: str, body: bytes) -> None:
        """Upload `body` as `bucket`/`key` (creating the bucket), as admin."""
        self._bucket(bucket).put_object(Bucket=bucket, Key=key, Body=body)

    def upload_file(self, bucket: str, key: str, path: str) -> None:
        """Upload a local file (multipart for a large one), as admin."""
        self._bucket(bucket).upload_file(path, bucket, key)


def _wait_up(endpoint: str, proc: subprocess.Popen[bytes], deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"moto server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(endpoint + "/moto-api/data.json", timeout=1).close()
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    raise RuntimeError(f"moto server did not answer at {endpoint} within {deadline_s} s")


def _users(endpoint: str) -> dict[str, tuple[str, str]]:
    """Create admin, reader and nobody; exactly _SETUP_CALLS IAM calls."""
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
    )
    keys = {}
    for user, actions in (("admin", ["*"]), ("reader", READER_ACTIONS), ("nobody", None)):
        iam.create_user(UserName=user)
        if actions:
            policy = {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
            }
            iam.put_user_policy(UserName=user, PolicyName="p", PolicyDocument=json.dumps(policy))
        made = iam.create_access_key(UserName=user)["AccessKey"]
        keys[user] = (made["AccessKeyId"], made["SecretAccessKey"])
    return keys


@contextmanager
def s3_server() -> Iterator[S3Server]:
    """A moto S3 server with IAM enforced on a free loopback port, stopped on exit."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(_SETUP_CALLS))
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_up(endpoint, proc)
        yield S3Server(endpoint=endpoint, keys=_users(endpoint))
    finally:
        proc.terminate()  # moto's server stops at SIGTERM; kill it if it hangs
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
