"""Inputs the report tests share: the "Which configuration" JSONs take a few seconds."""

from __future__ import annotations

import pytest

from tests.reports.which_inputs import Inputs, build_inputs


@pytest.fixture(scope="package")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    return build_inputs(tmp_path_factory.mktemp("which"))
