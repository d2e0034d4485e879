//! `PostgresLease`: the leader lease in PostgreSQL (`taskyard.leader`, one
//! row; `taskyard.members`, a row per process that checked in). Its own
//! connection (never the commit path's), each call a short transaction of
//! its own. Every time is the database's: expires-at and ages come from
//! its `now()`, never from this process's clock. Releases and takeovers
//! are announced with `NOTIFY taskyard_leader`, which standbys `LISTEN`
//! to, so a clean stop hands over at once.
//!
//! A lease is taken only when free or expired, never because the holder's
//! name matches: a restarted process (even one configured with the same
//! `node-name`) never inherits its predecessor's lease, it acquires a new
//! epoch.

use crate::store::lease::{LeaderRecord, LeaseError, LeaseStore, Member, MemberRole, NodeIdentity};
use crate::store::postgres::{schema, PgTarget};
use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;
use std::time::{Duration, Instant};
use taskyard_protocol::LeaderAddresses;

/// The notification channel of lease changes.
pub const CHANNEL: &str = "taskyard_leader";

/// Member rows not seen for this long are deleted at check-in, so names
/// of processes long gone do not pile up.
pub const FORGET_MEMBERS_AFTER: Duration = Duration::from_secs(3600);

/// Milliseconds between two timestamps on the database's clock; an
/// infinite one (the row's "never") counts as long ago.
const AGE_MS: &str = "CASE WHEN isfinite(b) AND isfinite(a) \
     THEN (EXTRACT(EPOCH FROM (a - b)) * 1000)::bigint ELSE -9223372036854775807 END";

fn ms_between(a: &str, b: &str) -> String {
    AGE_MS.replace("(a - b)", &format!("({a} - {b})")).replace(
        "isfinite(b) AND isfinite(a)",
        &format!("isfinite({b}) AND isfinite({a})"),
    )
}

/// See the module documentation.
pub struct PostgresLease {
    target: PgTarget,
    conn: Option<Client>,
    /// Bounds every statement (a third of the lease), so a stuck call
    /// cannot keep the lease thread from stepping down for long.
    statement_timeout: Duration,
}

/// Closing a connection blocks on the driver's own runtime, which may not
/// happen on a thread that drives another (a node's start-up failing on
/// the actor system's thread drops its lease there): such a connection is
/// closed on a thread of its own.
impl Drop for PostgresLease {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = std::thread::spawn(move || drop(conn)).join();
            }
        }
    }
}

impl PostgresLease {
    /// Parses `url`; connects (and migrates schema `taskyard`) on first use
    /// and again after a lost connection.
    pub fn new(url: &str, ttl: Duration) -> Result<PostgresLease, LeaseError> {
        let target = PgTarget::parse(url).map_err(|reason| LeaseError {
            place: "postgres-url".into(),
            reason,
        })?;
        Ok(PostgresLease {
            target,
            conn: None,
            statement_timeout: (ttl / 3).max(Duration::from_millis(100)),
        })
    }

    fn error(&self, reason: String) -> LeaseError {
        LeaseError {
            place: self.target.describe().to_string(),
            reason: self.target.redact(&reason),
        }
    }

    fn driver(&mut self, e: postgres::Error) -> LeaseError {
        if self.conn.as_ref().is_some_and(Client::is_closed) {
            self.conn = None;
        }
        let text = crate::store::postgres::error_text(&e);
        self.error(text)
    }

    /// The connection, opened (migrated, listening) if there is none.
    fn conn(&mut self) -> Result<&mut Client, LeaseError> {
        if self.conn.as_ref().is_some_and(Client::is_closed) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let mut client = self.target.connect().map_err(|e| self.error(e))?;
            schema::migrate(&mut client).map_err(|e| self.error(e.to_string()))?;
            let setup = format!(
                "SET statement_timeout = {}; LISTEN {CHANNEL}",
                self.statement_timeout.as_millis()
            );
            client
                .batch_execute(&setup)
                .map_err(|e| self.error(crate::store::postgres::error_text(&e)))?;
            self.conn = Some(client);
        }
        self.conn.as_mut().ok_or_else(|| LeaseError {
            place: "postgres".into(),
            reason: "no connection".into(),
        })
    }

    /// Runs `f` on the connection, forgetting a connection that broke.
    fn with<T>(
        &mut self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, LeaseError> {
        let client = self.conn()?;
        match f(client) {
            Ok(v) => Ok(v),
            Err(e) => Err(self.driver(e)),
        }
    }
}

fn ttl_ms(ttl: Duration) -> f64 {
    ttl.as_millis() as f64
}

fn role_name(role: MemberRole) -> &'static str {
    match role {
        MemberRole::Leader => "leader",
        MemberRole::Standby => "standby",
    }
}

impl LeaseStore for PostgresLease {
    fn try_acquire(&mut self, me: &NodeIdentity, ttl: Duration) -> Result<Option<u64>, LeaseError> {
        let a = &me.addresses;
        self.with(|c| {
            let mut tx = c.transaction()?;
            let row = tx.query_opt(
                "UPDATE taskyard.leader SET holder = $1, epoch = epoch + 1,
                     expires_at = now() + $2::float8 * interval '1 millisecond',
                     renewed_at = now(), client_addr = $3, worker_addr = $4, http_addr = $5
                 WHERE id = 1 AND (holder = '' OR expires_at <= now())
                 RETURNING epoch",
                &[&me.node, &ttl_ms(ttl), &a.client, &a.worker, &a.http],
            )?;
            let epoch = row.map(|r| r.get::<_, i64>(0) as u64);
            if epoch.is_some() {
                tx.batch_execute(&format!("NOTIFY {CHANNEL}"))?;
            }
            tx.commit()?;
            Ok(epoch)
        })
    }

    fn renew(&mut self, me: &NodeIdentity, epoch: u64, ttl: Duration) -> Result<bool, LeaseError> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE taskyard.leader
                 SET expires_at = now() + $3::float8 * interval '1 millisecond', renewed_at = now()
                 WHERE id = 1 AND holder = $1 AND epoch = $2",
                &[&me.node, &(epoch as i64), &ttl_ms(ttl)],
            )?;
            // A leader never waits for notifications: drop those that
            // arrived (other nodes' takeovers), so they do not pile up.
            c.notifications().iter().count()?;
            Ok(n == 1)
        })
    }

    fn release(&mut self, me: &NodeIdentity, epoch: u64) -> Result<(), LeaseError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            let n = tx.execute(
                "UPDATE taskyard.leader SET holder = '', expires_at = '-infinity'
                 WHERE id = 1 AND holder = $1 AND epoch = $2",
                &[&me.node, &(epoch as i64)],
            )?;
            if n == 1 {
                tx.batch_execute(&format!("NOTIFY {CHANNEL}"))?;
            }
            tx.execute(
                "UPDATE taskyard.members SET role = 'standby' WHERE node = $1",
                &[&me.node],
            )?;
            tx.commit()
        })
    }

    fn leader(&mut self) -> Result<Option<LeaderRecord>, LeaseError> {
        let sql = format!(
            "SELECT holder, epoch, client_addr, worker_addr, http_addr, {}, {}
             FROM taskyard.leader WHERE id = 1",
            ms_between("expires_at", "now()"),
            ms_between("now()", "renewed_at"),
        );
        let row = self.with(|c| c.query_opt(&sql, &[]))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let epoch: i64 = row.get(1);
        if epoch == 0 {
            return Ok(None);
        }
        let renewed: i64 = row.get(6);
        Ok(Some(LeaderRecord {
            leader: LeaderAddresses {
                node: row.get(0),
                epoch: epoch as u64,
                client: row.get(2),
                worker: row.get(3),
                http: row.get(4),
            },
            expires_in_ms: row.get(5),
            renewed_ms_ago: if renewed < 0 { i64::MAX } else { renewed },
        }))
    }

    fn check_in(&mut self, me: &NodeIdentity, role: MemberRole) -> Result<(), LeaseError> {
        let a = &me.addresses;
        let role = role_name(role);
        let forget = FORGET_MEMBERS_AFTER.as_millis() as f64;
        self.with(|c| {
            let mut tx = c.transaction()?;
            let n = tx.execute(
                "UPDATE taskyard.members SET role = $2, client_addr = $3, worker_addr = $4,
                     http_addr = $5, seen_at = now()
                 WHERE node = $1",
                &[&me.node, &role, &a.client, &a.worker, &a.http],
            )?;
            if n == 0 {
                tx.execute(
                    "INSERT INTO taskyard.members (node, role, client_addr, worker_addr, http_addr, seen_at)
                     VALUES ($1, $2, $3, $4, $5, now())",
                    &[&me.node, &role, &a.client, &a.worker, &a.http],
                )?;
            }
            tx.execute(
                "DELETE FROM taskyard.members
                 WHERE seen_at < now() - $1::float8 * interval '1 millisecond'",
                &[&forget],
            )?;
            tx.commit()
        })
    }

    fn members(&mut self, seen_within: Duration) -> Result<Vec<Member>, LeaseError> {
        let sql = format!(
            "SELECT node, role, client_addr, worker_addr, http_addr, {}
             FROM taskyard.members
             WHERE seen_at >= now() - $1::float8 * interval '1 millisecond'
             ORDER BY CASE WHEN role = 'leader' THEN 0 ELSE 1 END, node",
            ms_between("now()", "seen_at"),
        );
        let within = seen_within.as_millis() as f64;
        let rows = self.with(|c| c.query(&sql, &[&within]))?;
        Ok(rows
            .iter()
            .map(|row| {
                let node: String = row.get(0);
                let role: String = row.get(1);
                Member {
                    addresses: LeaderAddresses {
                        node: node.clone(),
                        epoch: 0,
                        client: row.get(2),
                        worker: row.get(3),
                        http: row.get(4),
                    },
                    node,
                    role: if role == "leader" {
                        MemberRole::Leader
                    } else {
                        MemberRole::Standby
                    },
                    seen_ms_ago: row.get(5),
                }
            })
            .collect())
    }

    fn wait_for_change(&mut self, timeout: Duration) -> Result<(), LeaseError> {
        let deadline = Instant::now() + timeout;
        let client = match self.conn() {
            Ok(c) => c,
            Err(e) => {
                // Unreachable: wait out the timeout, the caller polls again.
                std::thread::sleep(timeout);
                return Err(e);
            }
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let waited = {
            let mut notifications = client.notifications();
            let first = notifications.timeout_iter(left).next().map(|_| ());
            // Several may be queued: one wake-up is enough.
            first.and_then(|_| notifications.iter().count().map(|_| ()))
        };
        match waited {
            Ok(()) => Ok(()),
            Err(e) => Err(self.driver(e)),
        }
    }
}
