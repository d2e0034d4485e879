//! A throwaway PostgreSQL cluster for a test: skipped (with a note) on a
//! machine without PostgreSQL's server binaries, a failure there under
//! `TASKYARD_REQUIRE_EXTERNAL=1`.

use super::external::Package;
pub use taskyard::store::postgres::throwaway::ThrowawayPostgres;

/// A fresh cluster, or `None` when PostgreSQL is not installed and the
/// test should skip (see `external`).
pub fn start() -> Option<ThrowawayPostgres> {
    start_with(&[])
}

/// Like `start`, with extra `postgresql.conf` settings.
pub fn start_with(settings: &[(&str, &str)]) -> Option<ThrowawayPostgres> {
    let installed = ThrowawayPostgres::available().then_some(());
    super::external::present("initdb", installed, Package::Debian("postgresql-15"))?;
    match ThrowawayPostgres::start_with(settings) {
        Ok(cluster) => Some(cluster),
        Err(e) => panic!("starting a throwaway PostgreSQL: {e}"),
    }
}
