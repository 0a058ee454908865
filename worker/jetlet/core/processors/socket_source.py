"""``stream_socket_p``: the lines a TCP server sends (Jet's ``StreamSocketP``).

Each processor opens its own connection to ``host:port`` on its first
``complete()`` call (so a server sees one connection per source processor),
then, call by call:

1. emits what it decoded before and could not emit (the outbox was full);
2. reads one chunk, waiting at most ``poll_timeout_s`` (a timeout returns
   False with nothing emitted, so the engine can cancel the job and the
   processor never blocks for long);
3. decodes the chunk with an incremental decoder (a multi-byte character may
   straddle two chunks), cuts the text at ``\\n`` (dropping a ``\\r`` before
   it) and keeps the unfinished last line for the next chunk.

When the server closes the connection, an unfinished last line is emitted
too, and ``complete()`` returns True once everything is out: the stream ends.
The processor blocks on the socket, so it is non-cooperative. It keeps no
snapshot state: a TCP stream cannot be replayed.
"""

from __future__ import annotations

import codecs
import socket

from jetlet.core import processor

CONNECT_TIMEOUT_S = 10.0
POLL_TIMEOUT_S = 0.05
_CHUNK_BYTES = 64 * 1024


class StreamSocketP(processor.Processor):
    """See the module doc."""

    def __init__(self, host: str, port: int, encoding: str, poll_timeout_s: float = POLL_TIMEOUT_S) -> None:
        self._host = host
        self._port = port
        self._encoding = encoding
        self._poll_timeout_s = poll_timeout_s
        self._socket: socket.socket | None = None
        self._decoder = codecs.getincrementaldecoder(encoding)()
        self._partial = ""
        self._pending: list[str] = []
        self._ended = False

    def is_cooperative(self) -> bool:
        return False

    def complete(self) -> bool:
        if not self._emit_pending():
            return False
        if self._ended:
            return True
        chunk = self._read_chunk()
        if chunk is None:
            return False
        if chunk:
            self._pending = self._lines_of(self._decoder.decode(chunk))
            self._emit_pending()
            return False
        self._end_of_stream()
        return self._emit_pending()

    def _read_chunk(self) -> bytes | None:
        """A chunk of bytes, ``b""`` at the end of the stream, None if nothing came in time."""
        connection = self._socket or self._connect()
        try:
            return connection.recv(_CHUNK_BYTES)
        except TimeoutError:
            return None

    def _connect(self) -> socket.socket:
        address = f"{self._host}:{self._port}"
        try:
            connection = socket.create_connection((self._host, self._port), timeout=CONNECT_TIMEOUT_S)
        except OSError as exc:
            raise ConnectionError(f"Sources.socket: cannot connect to {address}: {exc}") from exc
        connection.settimeout(self._poll_timeout_s)
        self._socket = connection
        self.context.logger.info("Sources.socket: connected to %s", address)
        return connection

    def _lines_of(self, text: str) -> list[str]:
        pieces = (self._partial + text).split("\n")
        self._partial = pieces.pop()
        return [_without_cr(line) for line in pieces]

    def _end_of_stream(self) -> None:
        self._ended = True
        self._pending = self._lines_of(self._decoder.decode(b"", final=True))
        if self._partial:
            self._pending.append(_without_cr(self._partial))
            self._partial = ""
        self._close_socket()

    def _emit_pending(self) -> bool:
        if self._pending:
            taken = self.outbox.offer_batch(self._pending)
            self._pending = self._pending[taken:]
        return not self._pending

    def close(self) -> None:
        self._close_socket()

    def _close_socket(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def _without_cr(line: str) -> str:
    return line[:-1] if line.endswith("\r") else line


def stream_socket_p(host: str, port: int, encoding: str = "utf-8") -> processor.ProcessorMetaSupplier:
    """Each processor streams the lines ``host:port`` sends until the server closes (one per member)."""
    return processor.ProcessorMetaSupplier.of(
        lambda: StreamSocketP(host, port, encoding), preferred_local_parallelism=1
    )
