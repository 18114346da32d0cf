"""The protocol reader of the lost-commit-reply fault (harness/net/pgwire.py) on hand-built server
streams: messages split across chunks and several to a chunk, the startup's bare ``N``, an encrypted
stream left alone, COMMIT against other tags, and an autocommit write's completion judged by the
ReadyForQuery that follows. No sockets, no database."""

from __future__ import annotations

import struct

import pytest

from pg_job_chaos.harness.net.pgwire import ServerStream


def msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def complete(tag: str) -> bytes:
    return msg(b"C", tag.encode() + b"\0")


def ready(status: bytes) -> bytes:
    return msg(b"Z", status)


def startup(pid: int = 4242) -> bytes:
    """A server's answer to a refused SSLRequest, then a login: AuthenticationOk, a ParameterStatus,
    BackendKeyData, ReadyForQuery idle."""
    return (b"N" + msg(b"R", struct.pack("!i", 0)) + msg(b"S", b"server_version\x0017.0\0")
            + msg(b"K", struct.pack("!ii", pid, 77)) + ready(b"I"))


def feed(stream: ServerStream, chunks, armed: bool = True) -> tuple[bytes, bool]:
    """Every chunk in order; what was forwarded, and whether it struck (nothing is fed after)."""
    out = b""
    for c in chunks:
        got, strike = stream.feed(c, armed)
        out += got
        if strike:
            return out, True
    return out, False


def splits(data: bytes):
    """*data* cut in two at every offset, and byte by byte."""
    for i in range(len(data) + 1):
        yield [data[:i], data[i:]]
    yield [data[i:i + 1] for i in range(len(data))]


def logged_in(pid: int = 4242) -> ServerStream:
    s = ServerStream()
    assert s.feed(startup(pid), False) == (startup(pid), False)
    return s


def test_the_startup_is_read_whole_or_split_anywhere_and_forwarded_unchanged():
    for chunks in splits(startup(31337)):
        s = ServerStream()
        out, strike = feed(s, chunks, armed=False)
        assert (out, strike) == (startup(31337), False)
        assert s.pid == 31337 and s.status == b"I" and s.phase == "messages"


def test_several_messages_in_one_chunk_and_a_big_one_across_many_are_forwarded_as_they_come():
    s = logged_in()
    rows = msg(b"1") + msg(b"2") + msg(b"T", b"x" * 20) + msg(b"D", b"y" * 200_000) + complete("SELECT 1") \
        + ready(b"I")
    chunks = [rows[i:i + 65536] for i in range(0, len(rows), 65536)]
    got = [s.feed(c, True) for c in chunks]
    assert all(not strike for _, strike in got)
    assert [len(out) for out, _ in got[:-1]] == [len(c) for c in chunks[:-1]]  # no buffering of the rows
    assert b"".join(out for out, _ in got) == rows


@pytest.mark.parametrize("tag", ["SELECT 1", "BEGIN", "ROLLBACK", "COMMIT PREPARED", "SET"])
def test_other_tags_pass_even_armed(tag):
    reply = complete(tag) + ready(b"I")
    for chunks in splits(reply):
        assert feed(logged_in(), chunks) == (reply, False)


def test_an_armed_commit_reply_is_withheld_from_its_command_complete_on_wherever_it_is_split():
    before = msg(b"D", b"row") + complete("SELECT 1") + ready(b"T") + msg(b"N", b"notice\0")
    reply = before + complete("COMMIT") + ready(b"I")
    for chunks in splits(reply):
        s = logged_in()
        out, strike = feed(s, chunks)
        assert strike and out == before
        assert s.feed(ready(b"I"), True) == (b"", True)  # struck: it takes nothing more


def test_a_commit_reply_unarmed_passes():
    reply = complete("COMMIT") + ready(b"I")
    assert feed(logged_in(), [reply], armed=False) == (reply, False)


@pytest.mark.parametrize("tag", ["UPDATE 1", "INSERT 0 1", "DELETE 3", "MERGE 1"])
def test_an_autocommit_write_is_struck_when_its_ready_for_query_says_idle(tag):
    reply = msg(b"1") + msg(b"2") + msg(b"n") + complete(tag) + ready(b"I")
    for chunks in splits(reply):
        out, strike = feed(logged_in(), chunks)
        assert strike and out == msg(b"1") + msg(b"2") + msg(b"n")


def test_the_autocommit_write_is_held_until_its_ready_for_query_arrives():
    s = logged_in()
    assert s.feed(complete("UPDATE 1") + msg(b"N", b"a notice\0"), True) == (b"", False)
    assert s.holding
    assert s.feed(ready(b"I"), True) == (b"", True)


def test_a_write_inside_a_transaction_block_passes():
    s = logged_in()
    begun = complete("BEGIN") + ready(b"T")
    assert feed(s, [begun]) == (begun, False)
    write = complete("UPDATE 1") + ready(b"T")
    for chunks in splits(write):
        assert feed(s, chunks) == (write, False)
    assert s.status == b"T"


def test_a_write_sent_idle_that_ends_in_a_transaction_or_an_error_is_released():
    # Sent while idle, yet ReadyForQuery T: a BEGIN in the same query string went first.
    t = complete("UPDATE 1") + ready(b"T")
    for chunks in splits(t):
        assert feed(logged_in(), chunks) == (t, False)
    # The implicit transaction failed after the write (a multi-statement query): nothing committed.
    failed = complete("UPDATE 1") + msg(b"E", b"SERROR\0C22012\0\0") + ready(b"I")
    for chunks in splits(failed):
        assert feed(logged_in(), chunks) == (failed, False)


def test_a_held_write_is_released_when_the_slot_is_disarmed_meanwhile():
    s = logged_in()
    assert s.feed(complete("DELETE 1"), True) == (b"", False)
    assert s.feed(ready(b"I"), False) == (complete("DELETE 1") + ready(b"I"), False)
    assert not s.holding


def test_an_encrypted_stream_is_opaque_and_never_struck():
    commit = complete("COMMIT") + ready(b"I")
    for first in (b"S", b"G", b"\x16\x03\x03"):  # SSL or GSS accepted; a direct TLS record
        s = ServerStream()
        data = first + b"\x00garbage" + commit
        assert feed(s, [data[:3], data[3:]]) == (data, False)
        assert s.phase == "opaque" and s.pid is None


def test_a_gss_then_ssl_refusal_is_two_bare_bytes():
    s = ServerStream()
    data = b"N" + startup(9)
    assert feed(s, [data[:1], data[1:2], data[2:]], armed=False) == (data, False)
    assert s.pid == 9


def test_a_stream_that_is_not_the_protocol_is_forwarded_untouched():
    s = logged_in()
    bad = b"C\x00\x00\x00\x01" + complete("COMMIT")  # a length below 4
    assert feed(s, [bad]) == (bad, False) and s.phase == "opaque"
