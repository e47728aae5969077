"""The run page's stream, its pure parts: where a stream starts and how an event is written."""

from hypothesis import given
from hypothesis import strategies as st

from gpus.run_stream import resume_after, sse_message


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
