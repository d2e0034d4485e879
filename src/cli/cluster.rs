//! `taskyard cluster`: who leads, the lease, and the coordinators that
//! checked in. Asks `GET /api/cluster` of the coordinator's HTTP listener
//! (`--http`), which a standby answers as the leader does, so it works
//! against any coordinator still up, even while none leads. Without
//! `--http`, the coordinator at `--coordinator` names its HTTP address in
//! its `Hello`.

use crate::actors::node_view::ClusterInfo;
use crate::cli::output::{self, emit, table};
use crate::cli::{CliError, Context, Exit};
use clap::Args;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Longest the whole exchange may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Largest answer read (a cluster of a few hundred members).
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// The HTTP address (host:port, `http-listen` or `advertise-http`) of
    /// any coordinator of the cluster, leader or standby [default: the one
    /// the coordinator at --coordinator advertises].
    #[arg(long, env = "TASKYARD_HTTP", value_name = "ADDR")]
    pub http: Option<String>,
}

/// `taskyard cluster`.
pub fn cluster(ctx: &Context, args: ClusterArgs) -> Result<Exit, CliError> {
    let http = match args.http {
        Some(http) => http,
        None => http_of_coordinator(ctx)?,
    };
    let token = ctx.options.token.as_ref().map(|t| t.expose().to_string());
    let body = get(&http, "/api/cluster", token.as_deref())?;
    if ctx.json {
        let value: serde_json::Value = serde_json::from_str(&body)
            .map_err(|e| unreachable(&http, format!("not JSON: {e}")))?;
        emit(&output::json_text(&value))?;
        return Ok(Exit::Success);
    }
    let info: ClusterInfo = serde_json::from_str(&body)
        .map_err(|e| unreachable(&http, format!("not a cluster answer: {e}")))?;
    emit(&render(&info))?;
    Ok(Exit::Success)
}

/// The HTTP address the coordinator at `--coordinator` advertises, asked
/// over its client port; the error names `--http` as the way out.
fn http_of_coordinator(ctx: &Context) -> Result<String, CliError> {
    let missing = |why: String| {
        CliError::Unreachable(format!(
            "cannot find the HTTP listener: {why}; give it with --http ADDR (or TASKYARD_HTTP)"
        ))
    };
    let client = ctx.connect().map_err(|e| missing(e.to_string()))?;
    let http = client.coordinator_http().ok_or_else(|| {
        missing(format!(
            "the coordinator at {} names no HTTP address (http-listen off, or an older coordinator)",
            client.addr()
        ))
    })?;
    Ok(reachable_http(http, client.addr()))
}

/// `http` with an unspecified host (`0.0.0.0`, `[::]`: a listener bound to
/// every interface) replaced by the host `client_addr` reached the
/// coordinator at, which then also reaches its HTTP listener.
pub fn reachable_http(http: &str, client_addr: &str) -> String {
    let Ok(bound) = http.parse::<std::net::SocketAddr>() else {
        return http.to_string();
    };
    let host = client_addr.rsplit_once(':').map(|(host, _)| host);
    match host {
        Some(host) if bound.ip().is_unspecified() => format!("{host}:{}", bound.port()),
        _ => http.to_string(),
    }
}

fn unreachable(addr: &str, reason: impl std::fmt::Display) -> CliError {
    CliError::Unreachable(format!("HTTP {addr}: {reason}"))
}

/// One `GET` over HTTP/1.1 with `Connection: close`; the body of a 200.
fn get(addr: &str, path: &str, token: Option<&str>) -> Result<String, CliError> {
    let target = addr
        .to_socket_addrs()
        .map_err(|e| unreachable(addr, e))?
        .next()
        .ok_or_else(|| unreachable(addr, "no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&target, TIMEOUT).map_err(|e| unreachable(addr, e))?;
    let _ = stream.set_read_timeout(Some(TIMEOUT));
    let _ = stream.set_write_timeout(Some(TIMEOUT));
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Accept: application/json\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| unreachable(addr, e))?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER_BYTES)
        .read_to_end(&mut answer)
        .map_err(|e| unreachable(addr, e))?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| unreachable(addr, "not an HTTP answer"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        let line = head.lines().next().unwrap_or("");
        return Err(unreachable(addr, format!("{line}: {}", body.trim())));
    }
    Ok(body.to_string())
}

/// Milliseconds as `1.2s` (or `-` when unknown).
fn seconds(ms: Option<i64>) -> String {
    ms.map_or_else(
        || "-".to_string(),
        |ms| format!("{:.1}s", ms as f64 / 1000.0),
    )
}

/// The human-readable answer: the leader and its lease, then the members.
pub fn render(info: &ClusterInfo) -> String {
    let mut out = String::new();
    match &info.leader {
        Some(l) if !l.leader.node.is_empty() => {
            out.push_str(&format!(
                "leader: {} (epoch {})",
                l.leader.node, l.leader.epoch
            ));
            if l.expires_in_ms.is_some() {
                out.push_str(&format!(
                    ", lease renewed {} ago, expires in {}",
                    seconds(l.renewed_ms_ago),
                    seconds(l.expires_in_ms)
                ));
            }
            out.push('\n');
            let addr = |a: &Option<String>| a.clone().unwrap_or_else(|| "-".into());
            out.push_str(&format!(
                "  client {}  worker {}  http {}\n",
                addr(&l.leader.client),
                addr(&l.leader.worker),
                addr(&l.leader.http)
            ));
        }
        _ => out.push_str("leader: none (the lease is free or expired)\n"),
    }
    out.push_str(&format!(
        "answered by: {} ({}, store {})\n",
        info.node, info.role, info.store
    ));
    if let Some(e) = &info.lease_error {
        out.push_str(&format!("lease unreadable: {e}\n"));
    }
    out.push('\n');
    let rows = info
        .members
        .iter()
        .map(|m| {
            let dash = |a: &Option<String>| a.clone().unwrap_or_else(|| "-".into());
            vec![
                m.node.clone(),
                m.role.clone(),
                dash(&m.client),
                dash(&m.worker),
                dash(&m.http),
                m.seen_ms_ago.map_or_else(
                    || "-".to_string(),
                    |ms| format!("{} ago", seconds(Some(ms))),
                ),
            ]
        })
        .collect();
    out.push_str(&table(
        &["NODE", "ROLE", "CLIENT", "WORKER", "HTTP", "CHECKED IN"],
        rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::node::{ClusterLeader, ClusterMember};
    use crate::protocol::LeaderAddresses;

    #[test]
    fn an_http_address_bound_to_every_interface_is_reached_at_the_client_host() {
        assert_eq!(reachable_http("0.0.0.0:7480", "db1:7400"), "db1:7480");
        assert_eq!(reachable_http("[::]:7480", "[::1]:7400"), "[::1]:7480");
        assert_eq!(reachable_http("10.0.0.5:7480", "db1:7400"), "10.0.0.5:7480");
        assert_eq!(reachable_http("web:80", "db1:7400"), "web:80");
    }

    #[test]
    fn the_table_shows_the_leader_its_lease_and_every_member() {
        let member = |node: &str, role: &str| ClusterMember {
            node: node.into(),
            role: role.into(),
            client: Some(format!("{node}:7400")),
            worker: None,
            http: None,
            seen_ms_ago: Some(300),
        };
        let info = ClusterInfo {
            node: "b".into(),
            role: "standby".into(),
            epoch: None,
            store: "postgres".into(),
            leader: Some(ClusterLeader {
                leader: LeaderAddresses {
                    node: "a".into(),
                    epoch: 4,
                    client: Some("a:7400".into()),
                    worker: Some("a:7401".into()),
                    http: None,
                },
                expires_in_ms: Some(8700),
                renewed_ms_ago: Some(1300),
            }),
            members: vec![member("a", "leader"), member("b", "standby")],
            leader_changes: 0,
            last_step_down: None,
            lease_error: None,
        };
        let text = render(&info);
        assert!(
            text.starts_with("leader: a (epoch 4), lease renewed 1.3s ago, expires in 8.7s\n"),
            "{text}"
        );
        assert!(
            text.contains("client a:7400  worker a:7401  http -"),
            "{text}"
        );
        assert!(
            text.contains("answered by: b (standby, store postgres)"),
            "{text}"
        );
        assert!(
            text.contains("NODE  ROLE     CLIENT  WORKER  HTTP  CHECKED IN"),
            "{text}"
        );
        assert!(
            text.contains("b     standby  b:7400  -       -     0.3s ago"),
            "{text}"
        );
    }
}
