"""Fresh processes import the installed package and use it, all at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from stress_support import finish, report, start_python
from test_loading import INSTALLED_PACKAGE, TIMEOUT, WORKER, assert_all_checks_pass, single_record

pytestmark = pytest.mark.slow

CONCURRENT_PROCESSES = 8


def test_eight_fresh_processes_import_and_use_it_at_once(tmp_path):
    processes = [start_python([WORKER, "once"], cwd=tmp_path) for _ in range(CONCURRENT_PROCESSES)]
    records = [single_record(finish(process, TIMEOUT)) for process in processes]
    for record in records:
        assert "import_error" not in record, record["import_error"]
        assert Path(record["file"]).resolve().parent == INSTALLED_PACKAGE
        assert_all_checks_pass(record["checks"])
    report(f"loading: {CONCURRENT_PROCESSES} fresh processes imported and used it at once")
