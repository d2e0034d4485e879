//! `host[:port]` as it appears in a `Host` header, in an `Origin` and in
//! `http-allowed-hosts` entries, parsed strictly so two spellings of one
//! address compare equal and anything else (a scheme, a path, a space, an
//! unbracketed IPv6 address, port 0) is refused with the reason.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Longest DNS name (RFC 1035) and longest label.
const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;

/// The host part: an IP literal, or a DNS name kept in lower case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostName {
    Ip(IpAddr),
    Name(String),
}

/// A host and, when written, its port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    pub host: HostName,
    pub port: Option<u16>,
}

/// A page's origin, `scheme://host[:port]`, with the scheme's default port
/// dropped (as browsers serialize it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub https: bool,
    pub authority: Authority,
}

impl HostName {
    pub fn is_localhost(&self) -> bool {
        matches!(self, HostName::Name(n) if n == "localhost")
    }
}

impl Authority {
    /// The port a client meant: the written one, else HTTP's 80.
    pub fn port_or_default(&self) -> u16 {
        self.port.unwrap_or(80)
    }

    /// True when a page of `origin` is addressed by this authority: same
    /// host and same port, where a missing port is the origin scheme's
    /// default (a browser omits it from both `Host` and `Origin`).
    pub fn is_origin(&self, origin: &Origin) -> bool {
        let default = if origin.https { 443 } else { 80 };
        let port = self.port.filter(|p| *p != default);
        self.host == origin.authority.host && port == origin.authority.port
    }
}

impl FromStr for Authority {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.contains("://") {
            return Err("no scheme: write just host or host:port".into());
        }
        if text.contains('/') {
            return Err("no path: write just host or host:port".into());
        }
        let (host, port) = split_port(text)?;
        let port = port.map(parse_port).transpose()?;
        Ok(Authority {
            host: parse_host(host)?,
            port,
        })
    }
}

impl FromStr for Origin {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (https, rest) = if let Some(rest) = text.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = text.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err("not an http:// or https:// origin".into());
        };
        let mut authority: Authority = rest.parse()?;
        let default = if https { 443 } else { 80 };
        authority.port = authority.port.filter(|p| *p != default);
        Ok(Origin { https, authority })
    }
}

/// `host` and the text after its `:`; IPv6 literals must be bracketed.
fn split_port(text: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address needs its closing ]")?;
        return match after {
            "" => Ok((&text[..inside.len() + 2], None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((&text[..inside.len() + 2], Some(port))),
                None => Err(format!("{after:?} after ] is not :port")),
            },
        };
    }
    match text.split_once(':') {
        Some((_, port)) if port.contains(':') => {
            Err("an IPv6 address must be written in brackets, [::1]:7480".into())
        }
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((text, None)),
    }
}

fn parse_port(text: &str) -> Result<u16, String> {
    let port = text
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| text.parse::<u16>().ok())
        .flatten()
        .filter(|p| *p != 0);
    port.ok_or_else(|| format!("port {text:?} is not a number in 1..=65535"))
}

fn parse_host(text: &str) -> Result<HostName, String> {
    if let Some(inside) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        let ip: Ipv6Addr = inside
            .parse()
            .map_err(|_| format!("[{inside}] is not an IPv6 address"))?;
        return Ok(HostName::Ip(IpAddr::V6(ip)));
    }
    if let Ok(ip) = text.parse::<Ipv4Addr>() {
        return Ok(HostName::Ip(IpAddr::V4(ip)));
    }
    check_name(text)?;
    Ok(HostName::Name(text.to_ascii_lowercase()))
}

/// A DNS name: dot-separated labels of letters, digits and hyphens.
fn check_name(text: &str) -> Result<(), String> {
    let label_ok = |l: &str| {
        (1..=MAX_LABEL).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if text.is_empty() || text.len() > MAX_NAME || !text.split('.').all(label_ok) {
        return Err("the host is not an IP address or a DNS name (letters, digits, hyphens and dots; no scheme, path or spaces)".into());
    }
    Ok(())
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostName::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            HostName::Ip(ip) => write!(f, "{ip}"),
            HostName::Name(name) => f.write_str(name),
        }
    }
}

impl fmt::Display for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.host),
            None => write!(f, "{}", self.host),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority(text: &str) -> Authority {
        text.parse()
            .unwrap_or_else(|e| panic!("{text:?} parses: {e}"))
    }

    #[test]
    fn names_ips_and_ports_parse_to_one_spelling() {
        let a = authority("LocalHost:7480");
        assert_eq!(a.host, HostName::Name("localhost".into()));
        assert_eq!(a.port, Some(7480));
        assert!(a.host.is_localhost());
        assert_eq!(
            authority("[::1]:80").host,
            HostName::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST))
        );
        assert_eq!(authority("[::1]").port, None);
        assert_eq!(authority("10.0.0.5").to_string(), "10.0.0.5");
        assert_eq!(authority("[::1]:7480").to_string(), "[::1]:7480");
        assert_eq!(authority("ci-1.example").port_or_default(), 80);
    }

    #[test]
    fn anything_but_host_or_host_port_is_refused_with_the_reason() {
        for (text, reason) in [
            ("http://x", "no scheme"),
            ("x/path", "no path"),
            ("x:99999", "1..=65535"),
            ("x:0", "1..=65535"),
            ("x:", "1..=65535"),
            ("x:+80", "1..=65535"),
            ("", "DNS name"),
            ("a b", "DNS name"),
            ("::1", "brackets"),
            ("[::1", "closing ]"),
            ("[::1]x", "after ]"),
            ("[nope]", "IPv6"),
            ("-x.example", "DNS name"),
            ("a..b", "DNS name"),
        ] {
            let err = text.parse::<Authority>().expect_err(text);
            assert!(
                err.contains(reason),
                "{text:?}: {err:?} mentions {reason:?}"
            );
        }
    }

    #[test]
    fn origins_drop_their_default_port() {
        let o: Origin = "https://Taskyard.example:443".parse().expect("origin");
        assert!(o.https);
        assert_eq!(o.authority, authority("taskyard.example"));
        let o: Origin = "http://127.0.0.1:7480".parse().expect("origin");
        assert_eq!(o.authority.port, Some(7480));
        for bad in ["null", "file://", "ftp://x", "http://x/", "http://"] {
            assert!(bad.parse::<Origin>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_host_is_its_origin_when_host_and_effective_port_match() {
        let origin = |t: &str| t.parse::<Origin>().expect("origin");
        assert!(authority("127.0.0.1:7480").is_origin(&origin("http://127.0.0.1:7480")));
        assert!(authority("x.example").is_origin(&origin("https://x.example")));
        assert!(authority("x.example:80").is_origin(&origin("http://x.example")));
        assert!(authority("x.example:443").is_origin(&origin("https://x.example")));
        assert!(!authority("127.0.0.1:7480").is_origin(&origin("http://127.0.0.1:7481")));
        assert!(!authority("127.0.0.1:7480").is_origin(&origin("http://localhost:7480")));
        assert!(!authority("x.example:80").is_origin(&origin("https://x.example")));
    }
}
