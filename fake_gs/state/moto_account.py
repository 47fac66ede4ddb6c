"""The moto account behind the execution-log stage, and every moto internal it reads.

Runs in the stage's child (:mod:`fake_gs.state.log_stage`), before and beside moto's
server. Two ways to drive the account, the same answers over HTTP:

- **moto's backends** (:class:`BackendAccount`): ``iam_backends``, ``s3_backends`` and
  ``sts_backends`` called directly, and a run's earlier STS sessions taken out of
  ``STSBackend.assumed_roles`` (moto has no call that ends a session): one role and one
  live session per run, nothing kept after a revoke. Used when :func:`backends_missing`
  finds moto a release of :data:`TESTED_MOTO` whose backends take the arguments used here.
- **moto's public API** (:class:`PublicAccount`), otherwise or with
  ``FAKE_GS_STAGE_MOTO=public``: boto3 calls in this process under ``mock_aws``, signed
  by an admin user made in the stage's only unauthenticated calls
  (``moto.core.set_initial_no_auth_action_count``, before the server listens). Each grant
  makes a new role; the run's earlier role loses its policy, so its sessions are refused
  (403) but stay in moto's list: one small record per grant is kept, and moto's credential
  lookup walks them all (slower with every grant). Said once, on stderr.

On both, moto's IAM checks are on from the first call through its documented
``INITIAL_NO_AUTH_ACTION_COUNT`` environment variable (:func:`prepare`, before moto is
imported), and the server is composed from the names ``moto.server`` itself runs
(:func:`moto_app`, :func:`request_handler`). The stage's start-up self-check of its seal names
:data:`TESTED_MOTO` when a later moto changes what the seal relies on (moto 5.2 checks
``s3:ListObjectsV2`` where S3 checks ``s3:ListBucket``). Before 5.2.4 (every 5.1 release
included) moto refuses the signature of a listing with a prefix and of a key holding ``:``
as today's botocore signs them (SignatureDoesNotMatch), so no stage can serve a download there.
"""

from __future__ import annotations

import inspect
import json
import os
import secrets
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

#: The moto releases the stage was tested on (``pyproject.toml``'s ``logs`` extra: the same).
TESTED_MOTO = ">=5.2.4,<5.3"
_TESTED = ((5, 2, 4), (5, 3, 0))
#: ``public``: drive the account through moto's public API even when the backends are there.
PATH_VARIABLE = "FAKE_GS_STAGE_MOTO"
_ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
_ROLE_POLICY = "read-run-stage"


def _release_of(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "(no package metadata)"


def moto_release() -> str:
    return _release_of("moto")


def needs_moto(what: str) -> str:
    """``what`` went wrong, with the moto the stage needs and the one it found (and, for a
    moto in the tested range, the libraries it signs and serves with, which matter too)."""
    release = moto_release()
    if not _in_tested_range(release):
        return f"the execution-log stage needs moto {TESTED_MOTO} (found {release}): {what}"
    return (f"the execution-log stage failed on moto {release} with botocore {_release_of('botocore')} and "
            f"werkzeug {_release_of('werkzeug')} (tested: moto {TESTED_MOTO} with the botocore and werkzeug "
            f"constraints.txt pins): {what}")


def prepare() -> None:
    """Before moto is imported: its IAM checks on from the first call (moto reads the
    variable once, at import; ``/moto-api/reset-auth``, which would change it, is gated)."""
    if "moto" in sys.modules:
        raise RuntimeError("moto_account.prepare() must run before moto is imported")
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"


def moto_app() -> Any:
    """moto's server app, as ``moto.server`` (the module moto's own server runs) builds it."""
    import moto.server

    if not all(hasattr(moto.server, name) for name in ("DomainDispatcherApplication", "create_backend_app")):
        raise RuntimeError(needs_moto("moto.server no longer builds its app from DomainDispatcherApplication "
                                      "and create_backend_app"))
    return moto.server.DomainDispatcherApplication(moto.server.create_backend_app)


def request_handler() -> Any:
    """The request handler moto's own server uses: moto 5.2's ``MotoRequestHandler``
    (it keeps the spelling of S3 metadata headers), werkzeug's own before it."""
    import moto.server
    from werkzeug.serving import WSGIRequestHandler

    return getattr(moto.server, "MotoRequestHandler", WSGIRequestHandler)


def _in_tested_range(release: str) -> bool:
    try:
        parts = tuple(int(part) for part in release.split(".")[:3])
    except ValueError:
        return False
    return _TESTED[0] <= parts + (0,) * (3 - len(parts)) < _TESTED[1]


#: What the backend path calls, with the keyword arguments it passes.
_BACKEND_CALLS: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {
    ("moto.iam.models", "IAMBackend"): {
        "create_role": ("role_name", "assume_role_policy_document", "path", "permissions_boundary",
                        "description", "tags", "max_session_duration"),
        "put_role_policy": ("role_name", "policy_name", "policy_json"),
        "delete_role_policy": ("role_name", "policy_name"),
        "delete_role": ("role_name",)},
    ("moto.s3.models", "S3Backend"): {
        "create_bucket": ("bucket_name", "region_name"),
        "delete_bucket": ("bucket_name",),
        "put_object": ("bucket_name", "key_name", "value"),
        "delete_object": ("bucket_name", "key_name")},
    ("moto.sts.models", "STSBackend"): {
        "assume_role": ("region_name", "role_session_name", "role_arn", "policy", "duration", "external_id")},
}


def backends_missing() -> str | None:
    """None when the backend path may run; else why not (one sentence)."""
    release = moto_release()
    if not _in_tested_range(release):
        return f"moto {release} is outside the tested range {TESTED_MOTO}"
    import importlib

    for (module_name, class_name), calls in _BACKEND_CALLS.items():
        try:
            module = importlib.import_module(module_name)
            cls = getattr(module, class_name)
            getattr(module, class_name.replace("Backend", "").lower() + "_backends")
        except (ImportError, AttributeError) as exc:
            return f"moto {release} has no {module_name}.{class_name} and its backends ({exc})"
        for name, keywords in calls.items():
            try:
                inspect.signature(getattr(cls, name)).bind(None, **dict.fromkeys(keywords))
            except (AttributeError, TypeError, ValueError):
                return f"moto {release}'s {class_name}.{name} no longer takes {', '.join(keywords)}"
    from moto.sts.models import STSBackend

    if not isinstance(getattr(STSBackend("us-east-1", "000000000000"), "assumed_roles", None), list):
        return f"moto {release}'s STSBackend keeps no assumed_roles list"
    return None


def _random_account() -> str:
    return "".join(secrets.choice("123456789") for _ in range(12))


def _trust(principal: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": principal}, "Action": "sts:AssumeRole"}]})


class BackendAccount:
    """The account through moto's backends (module docstring)."""

    path = "moto's backends"

    def __init__(self, region: str) -> None:
        from moto.iam.models import iam_backends
        from moto.s3.models import s3_backends
        from moto.sts.models import sts_backends

        self.account = _random_account()
        self.region = region
        self._iam = iam_backends[self.account]["aws"]
        self._s3 = s3_backends[self.account]["aws"]
        self._sts = sts_backends[self.account]["aws"]
        self._roles: set[str] = set()

    def create_bucket(self, bucket: str) -> None:
        self._s3.create_bucket(bucket_name=bucket, region_name=self.region)

    def delete_bucket(self, bucket: str) -> None:
        self._s3.delete_bucket(bucket_name=bucket)

    def put_object(self, bucket: str, key: str, data: bytes) -> None:
        self._s3.put_object(bucket_name=bucket, key_name=key, value=data)

    def delete_object(self, bucket: str, key: str) -> None:
        self._s3.delete_object(bucket_name=bucket, key_name=key)

    def grant(self, run: str, policy: str) -> dict[str, str]:
        """A fresh STS session of the run's role (made with ``policy`` on first use); the
        run's earlier sessions stop working."""
        role = "stage-" + run
        if role not in self._roles:
            self._iam.create_role(role_name=role, assume_role_policy_document=_trust(f"arn:aws:iam::{self.account}:root"),
                                  path="/", permissions_boundary=None, description="fake-gs run stage",
                                  tags=[], max_session_duration=None)
            self._iam.put_role_policy(role_name=role, policy_name=_ROLE_POLICY, policy_json=policy)
            self._roles.add(role)
        self._forget_sessions(role)
        session = self._sts.assume_role(region_name=self.region, role_session_name="fake-gs-logs",
                                        role_arn=f"arn:aws:iam::{self.account}:role/{role}",
                                        policy="", duration=3600, external_id="")
        return {"access_key_id": session.access_key_id, "secret_access_key": session.secret_access_key,
                "session_token": session.session_token}

    def revoke(self, run: str) -> None:
        role = "stage-" + run
        if role in self._roles:
            self._roles.discard(role)
            self._forget_sessions(role)
            self._iam.delete_role_policy(role_name=role, policy_name=_ROLE_POLICY)
            self._iam.delete_role(role_name=role)

    def _forget_sessions(self, role: str) -> None:
        """Earlier sessions of ``role`` stop working (one live session per run, bounded)."""
        arn = f"arn:aws:iam::{self.account}:role/{role}"
        self._sts.assumed_roles[:] = [r for r in self._sts.assumed_roles if r.role_arn != arn]


class PublicAccount:
    """The account through moto's public API (module docstring)."""

    path = "moto's public API"

    def __init__(self, region: str) -> None:
        import boto3
        from moto import mock_aws
        from moto.core import set_initial_no_auth_action_count

        self.account = _random_account()
        self.region = region
        os.environ["MOTO_ACCOUNT_ID"] = self.account  # every call, in process or over HTTP
        self._mock = mock_aws()
        self._mock.start()
        anonymous = {"region_name": region, "aws_access_key_id": "stage-setup", "aws_secret_access_key": "-"}

        @set_initial_no_auth_action_count(3)
        def make_admin() -> dict[str, Any]:
            iam = boto3.client("iam", **anonymous)
            iam.create_user(UserName="stage-admin")
            iam.put_user_policy(UserName="stage-admin", PolicyName="all", PolicyDocument=json.dumps(_ALLOW_ALL))
            key: dict[str, Any] = iam.create_access_key(UserName="stage-admin")["AccessKey"]
            return key

        key = make_admin()
        signed = {"region_name": region, "aws_access_key_id": key["AccessKeyId"],
                  "aws_secret_access_key": key["SecretAccessKey"]}
        self._admin = f"arn:aws:iam::{self.account}:user/stage-admin"
        self._iam = boto3.client("iam", **signed)
        self._s3 = boto3.client("s3", **signed)
        self._sts = boto3.client("sts", **signed)
        self._grants = 0
        self._roles: dict[str, str] = {}  # run -> its current role

    def create_bucket(self, bucket: str) -> None:
        self._s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": self.region})

    def delete_bucket(self, bucket: str) -> None:
        self._s3.delete_bucket(Bucket=bucket)

    def put_object(self, bucket: str, key: str, data: bytes) -> None:
        self._s3.put_object(Bucket=bucket, Key=key, Body=data)

    def delete_object(self, bucket: str, key: str) -> None:
        self._s3.delete_object(Bucket=bucket, Key=key)

    def grant(self, run: str, policy: str) -> dict[str, str]:
        """A session of a new role of the run's; the run's earlier role loses its policy."""
        self.revoke(run)
        self._grants += 1
        role = f"stage-{self._grants}"
        self._iam.create_role(RoleName=role, AssumeRolePolicyDocument=_trust(self._admin),
                              Description="fake-gs run stage")
        self._iam.put_role_policy(RoleName=role, PolicyName=_ROLE_POLICY, PolicyDocument=policy)
        self._roles[run] = role
        session = self._sts.assume_role(RoleArn=f"arn:aws:iam::{self.account}:role/{role}",
                                        RoleSessionName="fake-gs-logs", DurationSeconds=3600)["Credentials"]
        return {"access_key_id": session["AccessKeyId"], "secret_access_key": session["SecretAccessKey"],
                "session_token": session["SessionToken"]}

    def revoke(self, run: str) -> None:
        """The run's sessions are refused from now on: their role keeps no policy. (Deleting
        the role would make moto answer their calls 404 NoSuchEntity, not 403.)"""
        role = self._roles.pop(run, None)
        if role is not None:
            self._iam.delete_role_policy(RoleName=role, PolicyName=_ROLE_POLICY)


Account = BackendAccount | PublicAccount


def open_account(region: str) -> Account:
    """The account, on the backends when they are there (after :func:`prepare`)."""
    if os.environ.get(PATH_VARIABLE) == "public":
        why: str | None = f"{PATH_VARIABLE}=public"
    else:
        why = backends_missing()
    if why is None:
        return BackendAccount(region)
    print(f"fake-gs log stage: {why}; driving moto {moto_release()} through its public API "
          "(every grant keeps a small record, and credential checks slow down as they add up)",
          file=sys.stderr, flush=True)
    return PublicAccount(region)
