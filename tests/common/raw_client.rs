//! A client speaking raw frames over a `TcpStream`, for tests of what the
//! coordinator does with peers that misbehave (never read, go quiet).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use taskyard::protocol::{ClientMessage, ClientRequest, CoordinatorToClient, Hello, Role};

/// One frame: 4-byte big-endian length, then the MessagePack body.
pub fn frame<T: serde::Serialize>(message: &T) -> Vec<u8> {
    let body = rmp_serde::to_vec_named(message).expect("encode");
    let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes
}

pub fn request_frame(request_id: u64, request: ClientRequest) -> Vec<u8> {
    frame(&ClientMessage::Request {
        request_id,
        request,
    })
}

/// A connected stream that has sent its `Hello` (and not read the reply).
pub fn connect(addr: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .write_all(&frame(&ClientMessage::Hello(Hello::new(
            Role::Client,
            None,
        ))))
        .expect("hello");
    stream
}

/// Reads one frame, or `None` at a clean close or after `within`.
pub fn read_frame(stream: &mut TcpStream, within: Duration) -> Option<CoordinatorToClient> {
    stream.set_read_timeout(Some(within)).expect("timeout");
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(rmp_serde::from_slice(&body).expect("a well-formed frame"))
}

/// What the coordinator at `addr` answers a `Hello` with, by itself (the
/// client library would follow a `NotLeader` instead of saying): `None`
/// when nothing answered within 2 s.
pub fn hello_answer(addr: &str) -> Option<CoordinatorToClient> {
    let mut stream =
        TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_millis(500)).ok()?;
    stream
        .write_all(&frame(&ClientMessage::Hello(Hello::new(
            Role::Client,
            None,
        ))))
        .ok()?;
    read_frame(&mut stream, Duration::from_secs(2))
}

/// The coordinator at `addr` itself serves clients (it leads).
pub fn serves(addr: &str) -> bool {
    matches!(hello_answer(addr), Some(CoordinatorToClient::Hello(_)))
}

/// The leader the coordinator at `addr` names in its `NotLeader`
/// (`Some(None)`: a standby that knows no leader; `None`: it serves, or
/// did not answer).
pub fn named_leader(addr: &str) -> Option<Option<String>> {
    match hello_answer(addr)? {
        CoordinatorToClient::NotLeader { leader } => Some(leader.map(|l| l.node)),
        _ => None,
    }
}

/// Waits until the coordinator at `addr` serves clients (it leads);
/// returns how long that took. Panics after `within`.
pub fn wait_serving(addr: &str, within: Duration) -> Duration {
    let started = std::time::Instant::now();
    while started.elapsed() < within {
        if serves(addr) {
            return started.elapsed();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{addr} did not lead within {within:?}");
}
