-- The handshake-era HTTP sessions of every gateway replica on the store, so that any
-- replica can forward a session's requests to the replica serving it, or take it over when
-- that replica is gone (see moat-transport's http::server::directory).
CREATE TABLE http_sessions (
    id             TEXT PRIMARY KEY,
    owner_id       TEXT        NOT NULL,
    owner_url      TEXT        NOT NULL,
    version        TEXT        NOT NULL,
    initialize     TEXT        NOT NULL,
    authenticated  BOOLEAN     NOT NULL,
    issuer         TEXT,
    subject        TEXT,
    log_level      TEXT,
    subscriptions  TEXT[]      NOT NULL DEFAULT '{}',
    legacy         BOOLEAN     NOT NULL,
    touched_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX http_sessions_touched ON http_sessions (touched_at);
