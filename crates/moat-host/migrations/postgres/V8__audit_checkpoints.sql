-- Signed heads of the shared audit chain (`[audit] sign`): each replica signs the head with
-- its own key when it is due, inside the transaction that wrote the records it signs.
CREATE TABLE audit_checkpoint (
    id          BIGSERIAL PRIMARY KEY,
    record_id   BIGINT NOT NULL,
    head        TEXT   NOT NULL,
    time_ms     BIGINT NOT NULL,
    public_key  TEXT   NOT NULL,
    signature   TEXT   NOT NULL
);
