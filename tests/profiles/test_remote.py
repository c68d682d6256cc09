"""Logs in object storage: profiles read from s3:// on a real S3 API on loopback (moto's
server, IAM enforced) equal the profiles of the same local files; a missing key and a refused
credential exit 2 naming the bucket and the key."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from profiles.build import build_profile
from profiles.remote import glob_regex, is_remote
from testkit.s3_server import S3Server, s3_server
from tests.helpers.range_server import range_server

pytestmark = pytest.mark.integration
BUCKET = "logs"


@pytest.fixture(scope="module")
def s3(local: Path) -> Iterator[S3Server]:
    with s3_server() as server:
        for p in sorted(local.iterdir()):
            server.put(BUCKET, f"q4/{p.name}", p.read_bytes())
        yield server


@pytest.fixture
def as_reader(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    for k, v in s3.env("reader").items():
        monkeypatch.setenv(k, v)
    return s3


def same_profile(remote: list[str], local: list[Path], scheme: str = "s3", **opts: object) -> None:
    """The profile of the objects `remote` names equals that of the `local` files uploaded
    as BUCKET/q4/NAME, the source's digest included."""
    a = build_profile(remote, **opts).model_dump()  # type: ignore[arg-type]
    b = build_profile([str(p) for p in local], **opts).model_dump()  # type: ignore[arg-type]
    assert a["source"]["files"] == [f"{scheme}://{BUCKET}/q4/{p.name}" for p in local]
    truth = hashlib.sha256(b"".join(p.read_bytes() for p in local)).hexdigest()
    assert a["source"]["digest"] == truth  # the bytes' sha256, as of the local files
    for d in (a, b):
        d.pop("created_at")
        d["source"].pop("files")
    assert a == b


@pytest.mark.parametrize("name", ["day-1.parquet", "small.csv", "openai_4.jsonl"])
def test_profile_from_s3_equals_the_local_profile(as_reader: S3Server, local: Path, name: str):
    same_profile([f"s3://{BUCKET}/q4/{name}"], [local / name])


def test_streamed_parquet_from_s3_equals_the_local_streamed_profile(
    as_reader: S3Server, local: Path
):
    files = [local / "day-1.parquet", local / "day-2.parquet"]
    prof = build_profile([f"s3://{BUCKET}/q4/day-*.parquet"], chunk_rows=700, group_by="model")
    assert prof.source.read_in_chunks is not None  # the streaming path, not a whole read
    same_profile([f"s3://{BUCKET}/q4/day-*.parquet"], files, chunk_rows=700, group_by="model")


def _cli(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["profile", *args])
    return res.exit_code, res.output


def test_cli_profiles_an_s3_object(as_reader: S3Server, tmp_path: Path):
    out = tmp_path / "p.json"
    code, text = _cli([f"s3://{BUCKET}/q4/small.csv", "-o", str(out), "-q"])
    assert code == 0, text
    assert json.loads(out.read_text())["requests"] == 500


def test_missing_key_exits_2_naming_bucket_and_key(as_reader: S3Server, tmp_path: Path):
    code, text = _cli([f"s3://{BUCKET}/q4/nope.parquet", "-o", str(tmp_path / "p.json")])
    assert code == 2
    assert "bucket 'logs'" in text and "key 'q4/nope.parquet'" in text
    assert "no such object" in text and "Traceback" not in text


def test_no_glob_match_exits_2(as_reader: S3Server, tmp_path: Path):
    code, text = _cli([f"s3://{BUCKET}/q3/*.parquet", "-o", str(tmp_path / "p.json")])
    assert code == 2 and "no object matches" in text and "bucket 'logs'" in text


@pytest.mark.parametrize("user", ["nobody", "stranger"])
def test_refused_credentials_exit_2_saying_access_denied(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, user: str
):
    # nobody: a real user without a policy; stranger: a key the server never issued.
    for k, v in s3.env(user).items():
        monkeypatch.setenv(k, v)
    code, text = _cli([f"s3://{BUCKET}/q4/small.csv", "-o", str(tmp_path / "p.json")])
    assert code == 2
    assert "access denied" in text and "key 'q4/small.csv'" in text and "bucket 'logs'" in text


def test_compressed_table_in_a_store_is_refused_not_downloaded(as_reader: S3Server, tmp_path: Path):
    code, text = _cli([f"s3://{BUCKET}/q4/small.csv.gz", "-o", str(tmp_path / "p.json")])
    assert code == 2 and "cannot be scanned in place" in text


def test_urls_and_globs():
    assert is_remote("s3://b/k") and is_remote("gs://b/k") and is_remote("az://c/k")
    assert is_remote("https://host/x.parquet") and not is_remote("logs/x.parquet")
    assert not is_remote("sample:azure_conv")
    star = glob_regex("q4/*.parquet")
    assert star.match("q4/a.parquet") and not star.match("q4/sub/a.parquet")
    deep = glob_regex("q4/**/*.parquet")
    assert deep.match("q4/a.parquet") and deep.match("q4/x/y/a.parquet")
    assert glob_regex("day-[12].csv").match("day-2.csv") and not glob_regex("d?.csv").match(
        "d/.csv"
    )


@pytest.mark.parametrize("name", ["day-1.parquet", "small.csv", "openai_4.jsonl"])
def test_profile_over_http_equals_the_local_profile(local: Path, name: str):
    with range_server(local) as base:
        a = build_profile([f"{base}/{name}"]).model_dump()
        code, text = _cli([f"{base}/missing.parquet", "-o", str(local / "p.json")])
    b = build_profile([str(local / name)]).model_dump()
    assert a["source"]["files"] == [f"{base}/{name}"]
    assert a["source"]["digest"] == hashlib.sha256((local / name).read_bytes()).hexdigest()
    for d in (a, b):
        d.pop("created_at")
        d["source"].pop("files")
    assert a == b
    assert code == 2 and "no such object" in text and "path 'missing.parquet'" in text
