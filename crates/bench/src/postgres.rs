//! The PostgreSQL a `--store postgres` benchmark runs on: the one at
//! `--postgres-url` (or `$TASKYARD_POSTGRES_URL`), else a throwaway
//! cluster started here and stopped when the benchmark ends. Every run
//! starts from an empty `taskyard` schema, so runs are comparable; a
//! schema that coordinators other than a bench's use is never dropped.

use crate::BenchError;
use taskyard_server::store::postgres::throwaway::ThrowawayPostgres;
use taskyard_server::store::postgres::PgTarget;

/// A database holding no `taskyard` schema yet, and the cluster it lives
/// in when this process started it.
pub struct BenchPostgres {
    url: String,
    /// Where the URL points, without its password.
    describe: String,
    /// Dropped (stopped, removed) with the benchmark.
    _own: Option<ThrowawayPostgres>,
}

impl BenchPostgres {
    /// Reaches `url` (or `$TASKYARD_POSTGRES_URL`; empty means neither),
    /// else starts a throwaway cluster; then drops the `taskyard` schema
    /// with everything in it.
    pub fn prepare(url: Option<&str>) -> Result<BenchPostgres, BenchError> {
        let given = url
            .map(str::to_string)
            .or_else(|| std::env::var("TASKYARD_POSTGRES_URL").ok())
            .filter(|u| !u.is_empty());
        let (url, own) = match given {
            Some(url) => (url, None),
            None => {
                let pg = ThrowawayPostgres::start()
                    .map_err(|e| BenchError::Start(format!("--store postgres: {e}")))?;
                (pg.url(), Some(pg))
            }
        };
        let target =
            PgTarget::parse(&url).map_err(|e| BenchError::Start(format!("--postgres-url: {e}")))?;
        let bench = BenchPostgres {
            describe: target.describe().to_string(),
            url,
            _own: own,
        };
        bench.reset(&target)?;
        Ok(bench)
    }

    /// The URL, password included: only for connecting.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where the database is (no password), and whether it was started
    /// here.
    pub fn describe(&self) -> String {
        match self._own {
            Some(_) => format!("{} (throwaway, started by the bench)", self.describe),
            None => self.describe.clone(),
        }
    }

    /// Drops the `taskyard` schema, unless a coordinator other than a
    /// bench's (node names `bench…`) has checked in there: a URL that
    /// points at a database in use (say `$TASKYARD_POSTGRES_URL` of a
    /// production shell) is refused, and nothing is changed.
    fn reset(&self, target: &PgTarget) -> Result<(), BenchError> {
        let fail = |e: String| BenchError::Start(format!("--postgres-url {}: {e}", self.describe));
        let sql = |e: postgres::Error| fail(target.redact(&e.to_string()));
        let mut client = target.connect().map_err(fail)?;
        let members = client
            .query_one("SELECT to_regclass('taskyard.members') IS NOT NULL", &[])
            .map_err(sql)?;
        if members.get::<_, bool>(0) {
            let foreign = client
                .query(
                    "SELECT node FROM taskyard.members WHERE node NOT LIKE 'bench%' LIMIT 1",
                    &[],
                )
                .map_err(sql)?;
            if let Some(row) = foreign.first() {
                let node: String = row.get(0);
                return Err(fail(format!(
                    "schema taskyard is in use by coordinator node {node:?}; the bench drops \
                     that schema, so give it a database of its own"
                )));
            }
        }
        client
            .batch_execute("DROP SCHEMA IF EXISTS taskyard CASCADE")
            .map_err(sql)
    }
}
