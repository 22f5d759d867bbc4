//! The PostgreSQL engine: connecting (the password from the environment or a file, TLS as
//! the URL's `sslmode` says), bringing the schema up to date, and a pool of connections.
//!
//! Migrations are refinery's (`migrations/postgres/V{n}__{name}.sql`, embedded at build
//! time). They run at start under an advisory lock, so replicas starting together apply
//! each once; a database carrying a migration this binary does not know (a newer moat
//! wrote it) is refused rather than used.

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::error::StoreError;
use crate::config::store::{DEFAULT_PASSWORD_ENV, StoreConfig};

mod embedded {
    refinery::embed_migrations!("migrations/postgres");
}

/// The advisory lock key migrations run under ("moat" in ASCII).
const MIGRATION_LOCK: i64 = 0x6d6f_6174;

/// How long connecting, or waiting for a pooled connection, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections per gateway: calls hold one only for a statement or two.
const POOL_SIZE: usize = 8;

/// A connected PostgreSQL store.
#[derive(Clone)]
pub struct Postgres {
    pool: Pool,
    shown: String,
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("url", &self.shown)
            .finish()
    }
}

impl Postgres {
    /// Connects to the store `cfg` names, brings its schema up to date and keeps a pool.
    /// Fails when the server cannot be reached, or its schema is newer than this binary's.
    pub async fn connect(cfg: &StoreConfig) -> Result<Postgres, StoreError> {
        Postgres::connect_to(cfg, None).await
    }

    /// [`Postgres::connect`], applying migrations only up to `version` (tests of upgrades).
    #[doc(hidden)]
    pub async fn connect_to(
        cfg: &StoreConfig,
        version: Option<i32>,
    ) -> Result<Postgres, StoreError> {
        let url = cfg.url.as_deref().ok_or(StoreError::NoUrl)?;
        let shown = redact_url(url);
        let mut pg = tokio_postgres::Config::from_str(url).map_err(|e| StoreError::Url {
            url: shown.clone(),
            detail: e.to_string(),
        })?;
        if let Some(password) = password(cfg)? {
            pg.password(password);
        }
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(CONNECT_TIMEOUT);
        }
        if pg.get_application_name().is_none() {
            pg.application_name("moat");
        }
        let tls = tls(&shown, pg.get_ssl_mode())?;
        // One connection of its own first: migrations, and the clear error at start.
        let (mut client, connection) = pg
            .connect(tls.clone())
            .await
            .map_err(|e| StoreError::connect(&shown, &e))?;
        let driver = tokio::spawn(connection);
        let migrated = migrate(&mut client, &shown, version).await;
        drop(client);
        let _ = driver.await;
        migrated?;
        let manager = Manager::from_config(
            pg.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(CONNECT_TIMEOUT))
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Unavailable {
                url: shown.clone(),
                detail: e.to_string(),
            })?;
        Ok(Postgres {
            pool,
            shown,
            config: pg,
            tls,
        })
    }

    /// The URL, without its password: for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// A pooled connection, or [`StoreError::Unavailable`].
    pub(crate) async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|e| StoreError::Unavailable {
            url: self.shown.clone(),
            detail: e.to_string(),
        })
    }

    /// A connection of its own, outside the pool, driven on the current runtime (the audit
    /// writer's thread has a runtime of its own).
    pub(crate) async fn connect_one(&self) -> Result<tokio_postgres::Client, StoreError> {
        let (client, connection) = self
            .config
            .connect(self.tls.clone())
            .await
            .map_err(|e| self.failed(e))?;
        tokio::spawn(connection);
        Ok(client)
    }

    /// A failed statement, as an error naming the store.
    pub(crate) fn failed(&self, e: tokio_postgres::Error) -> StoreError {
        StoreError::Unavailable {
            url: self.shown.clone(),
            detail: error_detail(&e),
        }
    }

    /// The highest migration applied (the schema's version).
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT COALESCE(MAX(version), 0)::BIGINT FROM refinery_schema_history",
                &[],
            )
            .await
            .map_err(|e| self.failed(e))?;
        Ok(row.get(0))
    }
}

/// The newest schema version this binary knows.
pub fn known_version() -> i32 {
    embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| m.version())
        .max()
        .unwrap_or(0)
}

async fn migrate(
    client: &mut tokio_postgres::Client,
    shown: &str,
    version: Option<i32>,
) -> Result<(), StoreError> {
    let failed = |e: tokio_postgres::Error| StoreError::Migrate {
        url: shown.to_owned(),
        detail: error_detail(&e),
    };
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(failed)?;
    let mut runner = embedded::migrations::runner()
        .set_abort_missing(true)
        .set_abort_divergent(true);
    if let Some(v) = version {
        runner = runner.set_target(refinery::Target::Version(v));
    }
    let report = runner.run_async(client).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    match report {
        Ok(report) => {
            for m in report.applied_migrations() {
                tracing::info!(
                    store = shown,
                    version = m.version(),
                    name = m.name(),
                    "store schema migrated"
                );
            }
        }
        Err(e) => {
            return Err(match e.kind() {
                refinery::error::Kind::MissingVersion(m) => StoreError::FutureSchema {
                    url: shown.to_owned(),
                    found: m.version(),
                    known: known_version(),
                },
                _ => StoreError::Migrate {
                    url: shown.to_owned(),
                    detail: e.to_string(),
                },
            });
        }
    }
    unlocked.map_err(failed)?;
    Ok(())
}

/// The password: the URL's own, else `password_file`'s first line, else the variable.
fn password(cfg: &StoreConfig) -> Result<Option<String>, StoreError> {
    if let Some(path) = &cfg.password_file {
        let text = std::fs::read_to_string(path).map_err(|e| StoreError::Password {
            detail: format!("cannot read {}: {e}", path.display()),
        })?;
        return Ok(Some(text.lines().next().unwrap_or_default().to_owned()));
    }
    let var = cfg.password_env.as_deref().unwrap_or(DEFAULT_PASSWORD_ENV);
    match std::env::var(var) {
        Ok(value) => Ok(Some(value)),
        Err(std::env::VarError::NotPresent) if cfg.password_env.is_none() => Ok(None),
        Err(e) => Err(StoreError::Password {
            detail: format!("${var}: {e}"),
        }),
    }
}

/// TLS as `sslmode` asks: the system's roots (`SSL_CERT_FILE` / `SSL_CERT_DIR` add a
/// private CA), and the certificate is always verified, as libpq's `verify-full` does.
fn tls(shown: &str, mode: SslMode) -> Result<MakeRustlsConnect, StoreError> {
    match MakeRustlsConnect::with_native_certs() {
        Ok((connector, _)) => Ok(connector),
        Err(_) if mode == SslMode::Disable => Ok(no_roots()),
        Err(errors) if mode == SslMode::Prefer => {
            tracing::debug!(
                store = shown,
                ?errors,
                "no trusted roots: TLS will fail and fall back"
            );
            Ok(no_roots())
        }
        Err(errors) => Err(StoreError::Tls {
            url: shown.to_owned(),
            detail: format!("no trusted root certificates could be loaded: {errors:?}"),
        }),
    }
}

/// A connector that trusts nothing: for `sslmode=disable` or `prefer` on a system without
/// roots, where TLS is not used or falls back.
fn no_roots() -> MakeRustlsConnect {
    MakeRustlsConnect::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
    )
}

/// The URL with its password (in the authority or as a parameter) replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        let authority_end = out[rest..].find(['/', '?']).map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..authority_end].rfind('@') {
            let userinfo = &out[rest..rest + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(rest + colon + 1..rest + at, "***");
            }
        }
    }
    // `password=` as a query parameter or a key=value setting.
    let lower = out.to_ascii_lowercase();
    if let Some(at) = lower.find("password=") {
        let start = at + "password=".len();
        let end = out[start..]
            .find(['&', ' '])
            .map_or(out.len(), |i| start + i);
        out.replace_range(start..end, "***");
    }
    out
}

/// The server's own message when there is one (the `Display` of a driver error is often
/// only "db error").
fn error_detail(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
    }
}

impl StoreError {
    fn connect(shown: &str, e: &tokio_postgres::Error) -> StoreError {
        StoreError::Connect {
            url: shown.to_owned(),
            detail: error_detail(e),
        }
    }
}

/// For this crate's tests: a store in a fresh schema of the server `MOAT_TEST_POSTGRES_URL`
/// names, and a connection of the test's own to look into it (its tables are in `schema`).
/// `None`, outside CI, when the variable is not set (the test says it did not run); under
/// CI a missing server is a failure.
#[cfg(test)]
pub(crate) struct TestStore {
    pub pg: Postgres,
    pub admin: tokio_postgres::Client,
    pub schema: String,
}

#[cfg(test)]
impl TestStore {
    pub(crate) async fn open(name: &str) -> Option<TestStore> {
        let Ok(url) = std::env::var("MOAT_TEST_POSTGRES_URL") else {
            assert!(
                std::env::var_os("CI").is_none(),
                "MOAT_TEST_POSTGRES_URL is not set: CI must run this test against PostgreSQL"
            );
            eprintln!("MOAT_TEST_POSTGRES_URL is not set: test not run");
            return None;
        };
        let schema = format!("{name}_{}", std::process::id());
        let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connect to MOAT_TEST_POSTGRES_URL");
        tokio::spawn(connection);
        admin
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
            ))
            .await
            .expect("a schema of the test's own");
        let sep = if url.contains('?') { '&' } else { '?' };
        let cfg = StoreConfig::with_url(format!("{url}{sep}options=-csearch_path%3D{schema}"));
        let pg = Postgres::connect(&cfg).await.expect("the store");
        Some(TestStore { pg, admin, schema })
    }

    /// Drops the schema.
    pub(crate) async fn close(self) {
        self.admin
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema))
            .await
            .expect("drop the test's schema");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redact_url("postgres://moat:s3cret@db:5432/moat?sslmode=require"),
            "postgres://moat:***@db:5432/moat?sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://moat@db/moat"),
            "postgres://moat@db/moat"
        );
        assert_eq!(
            redact_url("postgresql://db/moat?user=a&password=p&sslmode=disable"),
            "postgresql://db/moat?user=a&password=***&sslmode=disable"
        );
        assert_eq!(
            redact_url("host=db user=a password=p dbname=m"),
            "host=db user=a password=*** dbname=m"
        );
    }

    #[test]
    fn the_binary_knows_its_migrations() {
        assert!(known_version() >= 2);
    }
}
