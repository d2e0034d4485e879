//! A pipelined client connection: requests are written ahead of their
//! answers (the protocol matches them by request id), so one connection
//! keeps the coordinator busy without a round trip per request.

use std::collections::VecDeque;
use taskyard_client::client::connection::Connection;
use taskyard_client::client::{connect_handshaken, response_to, ClientError, ClientOptions};
use taskyard_protocol::{ClientMessage, ClientRequest, ClientResponse};

/// One connection with up to `window` requests in flight.
pub struct Pipeline {
    connection: Connection,
    next_request_id: u64,
    /// Ids written and not yet answered, oldest first.
    in_flight: VecDeque<u64>,
}

impl Pipeline {
    pub fn connect(addr: &str, options: &ClientOptions) -> Result<Pipeline, ClientError> {
        Ok(Pipeline {
            connection: connect_handshaken(addr, options)?,
            next_request_id: 1,
            in_flight: VecDeque::new(),
        })
    }

    /// Encodes `request` behind those already queued; nothing is written
    /// until `flush` (or `receive`, which flushes first).
    pub fn queue(&mut self, request: ClientRequest) -> Result<(), ClientError> {
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        self.connection.queue(ClientMessage::Request {
            request_id,
            request,
        })?;
        self.in_flight.push_back(request_id);
        Ok(())
    }

    pub fn flush(&mut self) -> Result<(), ClientError> {
        self.connection.flush()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The next answer. The coordinator answers one connection's requests
    /// in order, so it must be for the oldest request in flight.
    pub fn receive(&mut self) -> Result<ClientResponse, ClientError> {
        self.flush()?;
        let expected = self.in_flight.pop_front().ok_or_else(|| {
            ClientError::UnexpectedResponse("receive with nothing in flight".into())
        })?;
        let frame = self.connection.receive()?;
        response_to(expected, frame, |got| {
            format!("answer to request {got} while the oldest in flight is {expected}")
        })
    }
}
