//! Where the PostgreSQL store connects: the URL (`postgres://` or
//! `key=value` form, as libpq takes it), TLS through rustls when its
//! `sslmode` asks for it, and a description without the password for
//! logs and errors.

use postgres::config::{Host, SslMode};
use postgres::Client;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long a connection attempt waits unless the URL says otherwise
/// (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long unacknowledged data or a silent connection is tolerated
/// unless the URL says otherwise (`tcp_user_timeout`, `keepalives_idle`).
const STALLED_TIMEOUT: Duration = Duration::from_secs(10);

/// The driver's default `keepalives_idle` (2 hours), which a URL that does
/// not set it gets.
fn postgres_default_keepalives_idle() -> Duration {
    postgres::Config::new().get_keepalives_idle()
}

/// A parsed `postgres-url`. Holds the password; shows it nowhere (`Debug`
/// and `describe` leave it out).
#[derive(Clone)]
pub struct PgTarget {
    config: postgres::Config,
    /// `sslrootcert`: CA certificates (PEM) to verify the server with
    /// instead of the system's roots.
    root_cert: Option<PathBuf>,
    password: Option<String>,
    describe: String,
}

impl std::fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe)
    }
}

impl PgTarget {
    /// Parses `url`. The error says what is wrong without repeating the
    /// URL (it may hold a password).
    pub fn parse(url: &str) -> Result<PgTarget, String> {
        let (rest, root_cert) = take_root_cert(url);
        let mut config: postgres::Config = rest.parse().map_err(|e: postgres::Error| {
            redact(&format!("not a PostgreSQL URL: {e}"), password_in(url))
        })?;
        if config.get_hosts().is_empty() {
            return Err("not a PostgreSQL URL: no host".to_string());
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        // A database host that vanishes without closing the connection
        // (a partition, a dead machine) fails the statement in flight
        // after this long instead of never: the batch fails and the next
        // write connects again.
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(STALLED_TIMEOUT);
        }
        if config.get_keepalives_idle() == postgres_default_keepalives_idle() {
            config.keepalives_idle(STALLED_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("taskyard");
        }
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        let describe = describe(&config);
        Ok(PgTarget {
            config,
            root_cert,
            password,
            describe,
        })
    }

    /// `PostgreSQL USER@HOST:PORT/DB`: never the password.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// `text` with the password (if any) replaced by `***`: for anything
    /// from the driver that is shown or logged.
    pub fn redact(&self, text: &str) -> String {
        redact(text, self.password.as_deref())
    }

    /// Opens a connection, over TLS when `sslmode` is `prefer` or
    /// `require` (verified against `sslrootcert` or the system's roots).
    pub fn connect(&self) -> Result<Client, String> {
        let connected = match self.config.get_ssl_mode() {
            SslMode::Disable => self.config.connect(postgres::NoTls),
            _ => self.config.connect(self.tls()?),
        };
        connected.map_err(|e| self.redact(&error_text(&e)))
    }

    fn tls(&self) -> Result<tokio_postgres_rustls::MakeRustlsConnect, String> {
        let mut roots = rustls::RootCertStore::empty();
        match &self.root_cert {
            Some(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
                for cert in rustls_pemfile::certs(&mut &pem[..]) {
                    let cert = cert.map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
                }
            }
            None => {
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }
}

/// A driver error with its cause (the driver's `Display` alone often says
/// only "db error").
pub(crate) fn error_text(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

fn describe(config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or(user);
    format!("PostgreSQL {user}@{host}:{port}/{db}")
}

fn redact(text: &str, password: Option<&str>) -> String {
    match password.filter(|p| !p.is_empty()) {
        Some(p) => text.replace(p, "***"),
        None => text.to_string(),
    }
}

/// The password of a `postgres://user:password@...` URL, for redaction
/// before the URL is parsed.
fn password_in(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let userinfo = rest.split('@').next().filter(|_| rest.contains('@'))?;
    userinfo.split_once(':').map(|(_, p)| p)
}

/// Takes `sslrootcert=PATH` out of a URL's query (the driver does not know
/// it) and returns the rest.
fn take_root_cert(url: &str) -> (String, Option<PathBuf>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut root = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.strip_prefix("sslrootcert=") {
            Some(path) => {
                root = Some(PathBuf::from(path));
                false
            }
            None => true,
        })
        .collect();
    match kept.is_empty() {
        true => (base.to_string(), root),
        false => (format!("{base}?{}", kept.join("&")), root),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_without_the_password() {
        let t = PgTarget::parse("postgres://taskyard:s3cret@db.example:6543/jobs").expect("url");
        assert_eq!(t.describe(), "PostgreSQL taskyard@db.example:6543/jobs");
        assert!(!format!("{t:?}").contains("s3cret"));
        assert_eq!(t.redact("bad s3cret here"), "bad *** here");
    }

    #[test]
    fn a_bad_url_is_refused_without_echoing_the_password() {
        let e = PgTarget::parse("postgres://u:s3cret@h:notaport/db").expect_err("bad port");
        assert!(e.contains("not a PostgreSQL URL"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_silent_connection_times_out_unless_the_url_says_otherwise() {
        let t = PgTarget::parse("postgres://u@h/db").expect("url");
        assert_eq!(t.config.get_tcp_user_timeout(), Some(&STALLED_TIMEOUT));
        assert_eq!(t.config.get_keepalives_idle(), STALLED_TIMEOUT);
        assert_eq!(t.config.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        let t =
            PgTarget::parse("postgres://u@h/db?keepalives_idle=30&connect_timeout=2").expect("url");
        assert_eq!(t.config.get_keepalives_idle(), Duration::from_secs(30));
        assert_eq!(
            t.config.get_connect_timeout(),
            Some(&Duration::from_secs(2))
        );
    }

    #[test]
    fn sslrootcert_is_taken_out_of_the_query() {
        let (rest, root) = take_root_cert("postgres://h/db?sslmode=require&sslrootcert=/ca.pem");
        assert_eq!(rest, "postgres://h/db?sslmode=require");
        assert_eq!(root, Some(PathBuf::from("/ca.pem")));
        let t = PgTarget::parse("postgres://u@h/db?sslrootcert=/ca.pem").expect("url");
        assert_eq!(t.root_cert, Some(PathBuf::from("/ca.pem")));
    }
}
