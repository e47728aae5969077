"""The run page's stream, its parts without a server: where a stream starts, how an event is
written, and how a stream on SQLite learns that a row was committed."""

import asyncio
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpus.run_stream import Admission, DataVersion, Refused, VersionWatcher, resume_after, sse_message


def test_a_reconnecting_browser_resumes_after_its_last_event_id():
    assert resume_after("42", "7") == 42  # the browser's Last-Event-ID wins over the page's ?after=
    assert resume_after(None, "7") == 7  # the first connection: what the page showed
    assert resume_after(" 9 ", None) == 9
    assert resume_after(None, None) == 0


@given(st.one_of(st.none(), st.text(max_size=12)), st.one_of(st.none(), st.text(max_size=12)))
def test_any_header_or_query_gives_a_starting_sequence_number(last_event_id, after):
    assert resume_after(last_event_id, after) >= 0  # never an exception: "²", "-1", "1e3", "" start at 0


def test_an_event_puts_every_line_of_its_data_on_a_data_line():
    assert (
        sse_message("<p>a</p>\n<p>b</p>", event="step", id=5)
        == "event: step\nid: 5\ndata: <p>a</p>\ndata: <p>b</p>\n\n"
    )
    assert sse_message("", event="done") == "event: done\ndata: \n\n"


def sqlite_file(tmp_path):
    path = str(tmp_path / "run.sqlite3")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE step (seq INTEGER)")
    return path, writer


def test_on_sqlite_a_commit_by_another_connection_is_seen_and_nothing_else_is(tmp_path):
    path, writer = sqlite_file(tmp_path)
    version = DataVersion(path)
    assert not version.changed()  # nothing committed since it looked
    writer.execute("INSERT INTO step VALUES (1)")  # the worker records a row
    assert version.changed()
    assert not version.changed()  # once per commit
    writer.execute("BEGIN")
    writer.execute("INSERT INTO step VALUES (2)")
    assert not version.changed()  # not before it commits
    writer.execute("COMMIT")
    assert version.changed()
    version.close()


def test_on_sqlite_a_waiting_stream_wakes_when_a_row_commits_and_only_then(tmp_path):
    path, writer = sqlite_file(tmp_path)

    async def scenario():
        watcher = VersionWatcher(path)
        event = watcher.subscribe(7)
        await asyncio.wait_for(watcher.ready.wait(), 5)
        quiet = not await wait_set(event, 0.2)
        writer.execute("INSERT INTO step VALUES (1)")
        woke = await wait_set(event, 5)
        watcher.unsubscribe(7, event)
        await asyncio.wait_for(watcher.task, 5)  # no open stream: it stops looking
        return quiet, woke

    assert asyncio.run(scenario()) == (True, True)


async def wait_set(event, timeout):
    try:
        await asyncio.wait_for(event.wait(), timeout)
        return True
    except TimeoutError:
        return False


def test_a_stream_never_started_gives_its_place_back_when_dropped():
    admission = Admission()
    kept = admission.admit("ann", per_user=1, per_process=2, retry_after=5)
    dropped = admission.admit("bob", per_user=1, per_process=2, retry_after=5)
    with pytest.raises(Refused) as refused:
        admission.admit("ann", per_user=1, per_process=2, retry_after=5)
    assert (refused.value.status, refused.value.retry_after) == (429, 5)
    with pytest.raises(Refused) as refused:
        admission.admit("cy", per_user=1, per_process=2, retry_after=5)
    assert refused.value.status == 503
    del dropped  # a response the browser left before its first byte, collected
    assert admission.open() == 1 and admission.admit("cy", per_user=1, per_process=2, retry_after=5)
    kept.release()
    assert admission.open("ann") == 0
