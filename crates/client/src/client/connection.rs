//! A blocking framed connection: whole frames in, whole frames out, over one
//! TCP stream (plain or TLS), using the same `FrameCodec` as the async peers.

use crate::client::ClientError;
use bytes::BytesMut;
use std::io::{self, Read, Write};
use std::time::Duration;
use taskyard_protocol::{ClientMessage, CoordinatorToClient, FrameCodec, Role};
use tokio_util::codec::{Decoder, Encoder};

/// Bytes asked of the socket per `read` call.
const READ_CHUNK: usize = 8 * 1024;

/// A byte stream to the coordinator: a `TcpStream`, or TLS over one.
pub trait Stream: Read + Write + Send {}

impl<T: Read + Write + Send> Stream for T {}

/// One client connection. Frames are written whole; a partially received
/// frame stays in `read_buf` until the rest arrives. Requests may be
/// pipelined: `queue` several, `flush`, then `receive` their answers.
pub struct Connection {
    stream: Box<dyn Stream>,
    codec: FrameCodec<CoordinatorToClient, ClientMessage>,
    read_buf: BytesMut,
    write_buf: BytesMut,
    read_timeout: Duration,
    /// The HTTP address the coordinator's `Hello` named, if it did.
    pub(crate) coordinator_http: Option<String>,
}

impl Connection {
    /// Wraps a connected stream whose read timeout is already `read_timeout`.
    pub fn new(stream: Box<dyn Stream>, max_frame_bytes: usize, read_timeout: Duration) -> Self {
        Connection {
            stream,
            codec: FrameCodec::new(max_frame_bytes).dialling(Role::Client),
            read_buf: BytesMut::with_capacity(READ_CHUNK),
            write_buf: BytesMut::new(),
            read_timeout,
            coordinator_http: None,
        }
    }

    /// What a `NoAnswer` error says was waited for (the stream's read
    /// timeout, which the caller changed).
    pub fn set_read_timeout(&mut self, read_timeout: Duration) {
        self.read_timeout = read_timeout;
    }

    /// Encodes and writes one frame; returns once it is handed to the kernel.
    pub fn send(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        self.queue(message)?;
        self.flush()
    }

    /// Encodes one frame behind any already queued, without writing: a
    /// pipelining caller queues several and writes them with one `flush`.
    pub fn queue(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        Ok(self.codec.encode(message, &mut self.write_buf)?)
    }

    /// Writes every queued frame.
    pub fn flush(&mut self) -> Result<(), ClientError> {
        let written = self
            .stream
            .write_all(&self.write_buf)
            .and_then(|()| self.stream.flush());
        self.write_buf.clear();
        written.map_err(|e| self.io_error(e))
    }

    /// Blocks until one whole frame has arrived. A clean close between frames
    /// is `Closed`; a close inside a frame is `ProtocolError::Truncated`.
    pub fn receive(&mut self) -> Result<CoordinatorToClient, ClientError> {
        loop {
            if let Some(frame) = self.codec.decode(&mut self.read_buf)? {
                return Ok(frame);
            }
            if self.fill()? == 0 {
                return match self.codec.decode_eof(&mut self.read_buf)? {
                    Some(frame) => Ok(frame),
                    None => Err(ClientError::Closed),
                };
            }
        }
    }

    /// Reads whatever the socket has (at least one byte unless at EOF).
    fn fill(&mut self) -> Result<usize, ClientError> {
        let mut chunk = [0u8; READ_CHUNK];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.read_buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_error(e)),
            }
        }
    }

    /// A socket timeout (reported as `WouldBlock` on Unix, `TimedOut` on
    /// Windows) is `NoAnswer`; a reset by the peer is `Closed`.
    fn io_error(&self, e: io::Error) -> ClientError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                ClientError::NoAnswer(self.read_timeout)
            }
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => ClientError::Closed,
            _ => ClientError::Io(e),
        }
    }
}
