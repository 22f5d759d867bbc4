-- The audit trail of every gateway on the store, one hash chain (see moat-host's audit::chain).
CREATE TABLE audit (
    id           BIGINT PRIMARY KEY,
    time_ms      BIGINT NOT NULL,
    session      TEXT   NOT NULL,
    client       TEXT,
    server       TEXT   NOT NULL,
    tool         TEXT   NOT NULL,
    exposed_name TEXT   NOT NULL,
    args_digest  TEXT   NOT NULL,
    arguments    TEXT,
    decision     TEXT   NOT NULL,
    rule         TEXT   NOT NULL,
    consent      TEXT,
    outcome      TEXT   NOT NULL,
    duration_us  BIGINT NOT NULL,
    result_bytes BIGINT NOT NULL,
    error        TEXT,
    kind         TEXT   NOT NULL DEFAULT 'call',
    prev_hash    TEXT   NOT NULL,
    hash         TEXT   NOT NULL,
    subject      TEXT,
    client_id    TEXT
);
CREATE INDEX audit_time ON audit (time_ms);
