"""Logs in Google Cloud Storage and Azure Blob Storage: profiles read from gs:// and az:// on
the providers' emulators on loopback (fake-gcs-server, Azurite; testkit.cloud_emulators,
started here) equal the profiles of the same local files, through each provider's standard
environment variables; a missing key exits 2 naming the bucket and the key. The Azure cases
run with CAPPLAN_LONG_TESTS=1 (Azurite starts slowly)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from testkit.cloud_emulators import Emulator, azurite_main, azurite_server, gcs_server
from tests.helpers.missing import missing
from tests.profiles.test_remote import BUCKET, same_profile

pytestmark = pytest.mark.integration
STARTS: dict[str, Callable[[], AbstractContextManager[Emulator]]] = {
    "gs": gcs_server,
    "az": azurite_server,
}


LONG = pytest.mark.skipif(
    os.environ.get("CAPPLAN_LONG_TESTS") != "1",
    reason="Azurite's start (node loading its modules: 15 s on a busy 2-core box) for CI's "
    "30-minute budget: CAPPLAN_LONG_TESTS=1 (scripts/test.sh then installs Azurite)",
)


@pytest.fixture(scope="module", params=["gs", pytest.param("az", marks=LONG)])
def store(request: pytest.FixtureRequest, local: Path) -> Iterator[tuple[str, Emulator]]:
    scheme = str(request.param)
    if scheme == "az":
        try:
            azurite_main()
        except RuntimeError as err:
            missing(str(err))
    with STARTS[scheme]() as emulator:
        for p in sorted(local.iterdir()):
            emulator.put(BUCKET, f"q4/{p.name}", p.read_bytes())
        yield scheme, emulator


@pytest.fixture
def reading(store: tuple[str, Emulator], monkeypatch: pytest.MonkeyPatch) -> str:
    """The store's scheme, with only its provider's variables set."""
    for name in ("AWS_ENDPOINT_URL", "GOOGLE_SERVICE_ACCOUNT", "AZURE_STORAGE_USE_EMULATOR"):
        monkeypatch.delenv(name, raising=False)
    for k, v in store[1].env().items():
        monkeypatch.setenv(k, v)
    return store[0]


@pytest.mark.parametrize("name", ["day-1.parquet", "small.csv", "openai_4.jsonl"])
def test_profile_from_the_store_equals_the_local_profile(reading: str, local: Path, name: str):
    same_profile([f"{reading}://{BUCKET}/q4/{name}"], [local / name], scheme=reading)


def test_a_glob_streamed_from_the_store_equals_the_local_streamed_profile(
    reading: str, local: Path
):
    files = [local / "day-1.parquet", local / "day-2.parquet"]
    url = f"{reading}://{BUCKET}/q4/day-*.parquet"
    same_profile([url], files, scheme=reading, chunk_rows=700, group_by="model")


def test_a_missing_key_exits_2_naming_bucket_and_key(reading: str, tmp_path: Path):
    url = f"{reading}://{BUCKET}/q4/nope.parquet"
    res = CliRunner().invoke(app, ["profile", url, "-o", str(tmp_path / "p.json")])
    assert res.exit_code == 2, res.output
    assert "bucket 'logs'" in res.output and "key 'q4/nope.parquet'" in res.output
    assert "no such object" in res.output and "Traceback" not in res.output
