//! Lists of coordinator addresses and the order a peer tries them in.
//!
//! A worker's `coordinator`, the CLI's `--coordinator` and the client
//! library take `host:port[,host:port…]`: every coordinator of a
//! high-availability group, the leader among them. A peer tries them in
//! turn; a standby answers `NotLeader { leader }`, and the peer goes to the
//! leader's advertised address next (at most [`MAX_REDIRECTS`] times per
//! round, so two standbys naming each other cannot keep it busy); an
//! address that does not answer, or a standby that knows no leader, sends
//! it on to the next one. Pure: no sockets, no clock.

use thiserror::Error;

/// Most `NotLeader` redirects followed in one round through the list.
pub const MAX_REDIRECTS: usize = 3;

/// Why an address list was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AddressError {
    #[error("is empty: give host:port, or several separated by commas")]
    Empty,
    #[error("element {position} is empty (a stray comma?)")]
    EmptyElement { position: usize },
    #[error("{addr:?} is not host:port: {reason}")]
    Bad { addr: String, reason: String },
}

/// Splits `list` at commas into addresses, each `host:port` with a
/// non-empty host and a port from 1 to 65535 (surrounding spaces are
/// dropped). An empty list or element is an error, as is a bad address.
pub fn parse_address_list(list: &str) -> Result<Vec<String>, AddressError> {
    if list.trim().is_empty() {
        return Err(AddressError::Empty);
    }
    list.split(',')
        .enumerate()
        .map(|(i, addr)| check_address(addr.trim(), i + 1))
        .collect()
}

fn check_address(addr: &str, position: usize) -> Result<String, AddressError> {
    if addr.is_empty() {
        return Err(AddressError::EmptyElement { position });
    }
    let bad = |reason: &str| AddressError::Bad {
        addr: addr.to_string(),
        reason: reason.to_string(),
    };
    let (host, port) = addr.rsplit_once(':').ok_or_else(|| bad("no :port"))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(bad("no host"));
    }
    if host.contains(char::is_whitespace) {
        return Err(bad("the host contains a space"));
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad("the port must be a number from 1 to 65535")),
        Ok(_) => Ok(addr.to_string()),
    }
}

/// One round through the address list: every configured address once,
/// starting from the one that worked last, with the leaders that standbys
/// named tried right after them.
#[derive(Debug, Clone)]
pub struct LeaderSearch {
    addrs: Vec<String>,
    start: usize,
    tried: usize,
    redirect: Option<String>,
    redirects: usize,
}

impl LeaderSearch {
    /// A round over `addrs` starting at index `start` (wrapped).
    pub fn new(addrs: &[String], start: usize) -> Self {
        LeaderSearch {
            addrs: addrs.to_vec(),
            start: if addrs.is_empty() {
                0
            } else {
                start % addrs.len()
            },
            tried: 0,
            redirect: None,
            redirects: 0,
        }
    }

    /// The next address to try, or `None` once the round is over.
    pub fn next_addr(&mut self) -> Option<String> {
        if let Some(leader) = self.redirect.take() {
            return Some(leader);
        }
        if self.tried >= self.addrs.len() {
            return None;
        }
        let at = (self.start + self.tried) % self.addrs.len();
        self.tried += 1;
        Some(self.addrs[at].clone())
    }

    /// A standby named `leader`: it is tried next, unless this round
    /// already followed `MAX_REDIRECTS` redirects. Returns whether it will be.
    pub fn follow(&mut self, leader: &str) -> bool {
        if self.redirects >= MAX_REDIRECTS {
            return false;
        }
        self.redirects += 1;
        self.redirect = Some(leader.to_string());
        true
    }

    /// Where the next round should start if `addr` worked: its index in
    /// the list (a leader reached by a redirect that is not in the list
    /// keeps the current start).
    pub fn position_of(&self, addr: &str) -> usize {
        self.addrs
            .iter()
            .position(|a| a == addr)
            .unwrap_or(self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> Vec<String> {
        parse_address_list(s).expect("valid")
    }

    #[test]
    fn a_list_is_split_at_commas_and_trimmed() {
        assert_eq!(list("127.0.0.1:7400"), ["127.0.0.1:7400"]);
        assert_eq!(
            list("a.example:1, b.example:2 ,[::1]:3"),
            ["a.example:1", "b.example:2", "[::1]:3"]
        );
    }

    #[test]
    fn empty_lists_elements_and_bad_addresses_are_refused_by_position_or_text() {
        assert_eq!(parse_address_list(" "), Err(AddressError::Empty));
        assert_eq!(
            parse_address_list("a:1,,b:2"),
            Err(AddressError::EmptyElement { position: 2 })
        );
        assert_eq!(
            parse_address_list("a:1,"),
            Err(AddressError::EmptyElement { position: 2 })
        );
        for bad in ["a", ":7400", "a:0", "a:70000", "a:port", "a b:1"] {
            let err = parse_address_list(bad).expect_err(bad).to_string();
            assert!(
                err.starts_with(&format!("{bad:?} is not host:port")),
                "{err}"
            );
        }
    }

    #[test]
    fn a_round_tries_each_address_once_from_the_last_good_one() {
        let addrs = list("a:1,b:2,c:3");
        let mut round = LeaderSearch::new(&addrs, 1);
        let order: Vec<String> = std::iter::from_fn(|| round.next_addr()).collect();
        assert_eq!(order, ["b:2", "c:3", "a:1"]);
        assert_eq!(round.position_of("c:3"), 2);
        assert_eq!(round.position_of("elsewhere:9"), 1);
    }

    #[test]
    fn a_named_leader_is_tried_next_and_redirects_are_bounded() {
        let addrs = list("a:1,b:2");
        let mut round = LeaderSearch::new(&addrs, 0);
        assert_eq!(round.next_addr().as_deref(), Some("a:1"));
        assert!(round.follow("leader:9"));
        assert_eq!(round.next_addr().as_deref(), Some("leader:9"));
        for _ in 1..MAX_REDIRECTS {
            assert!(round.follow("leader:9"));
            assert_eq!(round.next_addr().as_deref(), Some("leader:9"));
        }
        assert!(!round.follow("leader:9"), "two standbys naming each other");
        assert_eq!(round.next_addr().as_deref(), Some("b:2"));
        assert_eq!(round.next_addr(), None);
    }
}
