//! A tiny blocking HTTP/1.1 client over `TcpStream` for end-to-end tests of
//! the coordinator's HTTP listener: one request per connection
//! (`Connection: close`), bodies by `Content-Length` or chunked.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response: status, lower-cased headers and the body as text.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A client for one listener, optionally presenting a bearer token.
#[derive(Debug, Clone)]
pub struct Http {
    pub addr: SocketAddr,
    pub token: Option<String>,
}

impl Http {
    pub fn new(addr: SocketAddr) -> Self {
        Http { addr, token: None }
    }

    pub fn with_token(addr: SocketAddr, token: &str) -> Self {
        Http {
            addr,
            token: Some(token.to_string()),
        }
    }

    pub fn get(&self, path: &str) -> Response {
        self.send("GET", path, None)
    }

    /// Submits `body` to `POST /api/jobs`, expecting 201; the job's id.
    pub fn submit(&self, body: &Value) -> String {
        let response = self.post("/api/jobs", body);
        assert_eq!(response.status, 201, "{response:?}");
        response.json()["job_id"]
            .as_str()
            .expect("job id")
            .to_string()
    }

    pub fn post(&self, path: &str, body: &Value) -> Response {
        self.send("POST", path, Some(body.to_string().as_bytes()))
    }

    /// Sends raw bytes as the body (for malformed-JSON tests), as
    /// application/json when the method is POST.
    pub fn send(&self, method: &str, path: &str, body: Option<&[u8]>) -> Response {
        let json: &[(&str, &str)] = if method == "POST" {
            &[("Content-Type", "application/json")]
        } else {
            &[]
        };
        self.request(method, path, json, body.unwrap_or_default())
    }

    /// Sends exactly `headers` (plus `Host: ADDR` unless they name a Host,
    /// `Connection: close`, the token if any and `Content-Length` for a
    /// body or a POST): what a browser or a hostile page would send.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let mut stream = TcpStream::connect(self.addr).expect("connect to the HTTP listener");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if method == "POST" || !body.is_empty() {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).expect("write request");
        stream.write_all(body).expect("write body");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read response");
        parse(&raw)
    }
}

fn parse(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&data[..end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("0").trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            return out;
        }
        let start = end + 2;
        out.extend_from_slice(&data[start..start + size]);
        data = &data[start + size + 2..];
    }
}
