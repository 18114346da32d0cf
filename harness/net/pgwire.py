"""The server's side of one PostgreSQL v3 connection, read as it passes through the fault proxy: which
backend it is, whether it is in a transaction, and -- when the ``lose-commit-reply`` fault is armed --
where the reply to a commit starts, so that the proxy can withhold it.

Contract. :meth:`ServerStream.feed` takes each chunk the server sends, in order (a message may be split
across chunks, a chunk may hold several), and returns the bytes to forward to the client now and whether
to strike: to cut the connection, the rest withheld. Every server message has a type byte and an int32
length (the length counts itself, not the type). Only the first bytes need care: a refused SSLRequest or
GSSENCRequest is answered with one bare ``N``; an accepted one (``S``, ``G``) or a direct TLS handshake
makes the stream opaque, and an opaque stream is forwarded as it comes and never struck.

What a commit's reply is. Armed, the stream strikes at

* a CommandComplete (``C``) whose tag is ``COMMIT`` (an explicit COMMIT or END that committed; a COMMIT of
  a failed transaction answers ``ROLLBACK`` and is not one), at once: its bytes and all after are withheld;
* a CommandComplete of an ``INSERT``, ``UPDATE``, ``DELETE`` or ``MERGE`` sent while the connection was
  idle (its last ReadyForQuery said ``I``: autocommit), when the ReadyForQuery that follows says ``I``
  again (the implicit transaction committed). Until then the bytes from that CommandComplete on are held;
  an ErrorResponse or a ReadyForQuery ``T``/``E`` first (it was inside a transaction block after all, or
  it failed) releases them and the stream goes on watching.

Messages the stream reads (``C``, ``Z``, ``K``: a few bytes each) go out only when whole; the others go
out as they come.
"""

from __future__ import annotations

READ = frozenset(b"CZK")  # CommandComplete, ReadyForQuery, BackendKeyData: the bodies we read
# what a server's first typed message is: Authentication, Error, NegotiateProtocolVersion
FIRST = frozenset(b"REv")
WRITES = frozenset((b"INSERT", b"UPDATE", b"DELETE", b"MERGE"))  # an autocommit finish's tags
MAX_READ = 1 << 16  # a C, Z or K longer than this is not a protocol we understand


class ServerStream:
    def __init__(self) -> None:
        self.phase = "negotiating"  # then "messages"; or "opaque" (encrypted, or not the v3 protocol)
        self.pid: int | None = None  # from BackendKeyData: the backend pid libpq reports
        self.status: bytes | None = None  # the last ReadyForQuery's status: b"I", b"T" or b"E"
        self._part = bytearray()  # the message being read: its header so far, or a whole C, Z or K
        self._skip = 0  # bytes left of a message forwarded without reading it
        self._held = bytearray()  # withheld from the client: an autocommit write's completion on
        self._struck = False

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def feed(self, data: bytes, armed: bool) -> tuple[bytes, bool]:
        """One chunk from the server -> (what to forward now, strike). After a strike, forward what was
        returned and cut the connection; the stream takes nothing more."""
        out = bytearray()
        if self._struck:
            return b"", True
        if self._held and not armed:  # disarmed meanwhile (another connection of the slot struck)
            out += self._held
            self._held.clear()
        i = 0
        n = len(data)
        while i < n:
            if self.phase == "opaque":
                self._release(out)
                out += data[i:]
                break
            if self._skip:
                k = min(self._skip, n - i)
                self._emit(out, data[i:i + k])
                self._skip -= k
                i += k
                continue
            if self.phase == "negotiating" and not self._part:
                first = data[i]
                if first == ord("N"):  # SSLRequest or GSSENCRequest refused: one byte, no message
                    self._emit(out, data[i:i + 1])
                    i += 1
                    continue
                if first not in FIRST:  # encryption accepted, a TLS record: nothing to read
                    self.phase = "opaque"
                    continue
                self.phase = "messages"
            k = self._want() - len(self._part)
            take = data[i:i + k]
            self._part += take
            i += len(take)
            if len(take) < k:
                break  # the rest of this message comes in a later chunk
            if self._message(out, armed):
                self._struck = True
                return bytes(out), True
        return bytes(out), False

    def _want(self) -> int:
        """How many bytes of the current message ``_part`` must hold: its header, or the whole of it."""
        if len(self._part) < 5:
            return 5
        return 1 + int.from_bytes(self._part[1:5], "big")

    def _message(self, out: bytearray, armed: bool) -> bool:
        """``_part`` holds a header or a whole message we read; True: strike now."""
        kind = self._part[0]
        length = int.from_bytes(self._part[1:5], "big")
        if len(self._part) == 5:
            if length < 4 or (kind in READ and length > MAX_READ):
                self.phase = "opaque"  # not the protocol we read: forward the rest untouched
                self._release(out)
                self._flush_part(out)
                return False
            if kind not in READ:
                if kind == ord("E") and self._held:  # the held write failed: nothing committed
                    self._release(out)
                self._flush_part(out)
                self._skip = length - 4
                return False
            if length > 4:
                return False  # read on: the body
        body = bytes(self._part[5:])
        if kind == ord("K"):
            self.pid = int.from_bytes(body[:4], "big") if len(body) >= 4 else None
        elif kind == ord("C") and armed:
            tag = body.rstrip(b"\0")
            if tag == b"COMMIT":
                self._part.clear()
                return True
            if tag.split(b" ")[0] in WRITES and self.status == b"I" and not self._held:
                self._held += self._part
                self._part.clear()
                return False
        elif kind == ord("Z"):
            self.status = body[:1]
            if self._held:
                if self.status == b"I" and armed:
                    self._part.clear()
                    return True
                self._release(out)
        self._flush_part(out)
        return False

    def _emit(self, out: bytearray, data) -> None:
        (self._held if self._held else out).extend(data)

    def _flush_part(self, out: bytearray) -> None:
        self._emit(out, self._part)
        self._part.clear()

    def _release(self, out: bytearray) -> None:
        out += self._held
        self._held.clear()
