-- The events of resumable SSE streams of handshake-era HTTP sessions, written by the replica
-- serving the session, so that the replica taking the session over when it dies can replay
-- what the client had not seen (see moat-transport's http::server::journal). Bounded: of
-- each stream only the answers and the latest events are kept; all go with their session,
-- or when nobody has written them for a while.
CREATE TABLE sse_events (
    session_id  TEXT        NOT NULL,
    stream      TEXT        NOT NULL,
    seq         BIGINT      NOT NULL,
    answers     BOOLEAN     NOT NULL,
    message     TEXT        NOT NULL,
    written_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, stream, seq)
);
CREATE INDEX sse_events_written ON sse_events (written_at);
