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
