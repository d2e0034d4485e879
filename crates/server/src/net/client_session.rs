//! `ClientSession`: one per client connection. Forwards each request to the
//! coordinator and writes each answer the outbox releases to it, cut to
//! fit one frame.

use crate::actors::coordinator::{ClientCommand, Coordinator};
use crate::actors::outbox::ClientAnswer;
use crate::net::handshake::SessionContext;
use crate::net::session_io::{SessionIo, SessionPhase};
use actix::clock::Instant;
use actix::io::WriteHandler;
use actix::{
    Actor, ActorFutureExt, Addr, AsyncContext, Context, Handler, Running, StreamHandler, WrapFuture,
};
use slog::debug;
use std::collections::VecDeque;
use std::time::Duration;
use taskyard_protocol::{
    fit, ClientMessage, ClientRequest, ClientResponse, CoordinatorToClient, ProtocolError,
    IDLE_CLOSED,
};
use tokio::io::{AsyncRead, AsyncWrite};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitingHello,
    Ready,
    Closing,
}

impl SessionPhase for Phase {
    const AWAITING_HELLO: Phase = Phase::AwaitingHello;
    const CLOSING: Phase = Phase::Closing;
}

/// See the module documentation.
pub struct ClientSession<W: AsyncWrite + Unpin + 'static> {
    coordinator: Addr<Coordinator>,
    io: SessionIo<Phase, ClientMessage, CoordinatorToClient, W>,
    in_flight: InFlight,
    /// When the last request arrived (or the connection opened, or a
    /// request was last seen in flight): the idle timeout counts from here.
    last_request: Instant,
}

/// The requests of one connection that count against
/// `max-in-flight-requests`: forwarded and not answered yet, or answered
/// with an answer the socket has not taken whole. So a client that does not
/// read its answers cannot have more requests served.
#[derive(Debug, Default)]
struct InFlight {
    /// Forwarded to the coordinator; no answer yet.
    unanswered: usize,
    /// For each answer queued but perhaps not on the socket yet, the stream
    /// offset where it ends (ascending).
    unwritten: VecDeque<u64>,
}

impl InFlight {
    /// How many requests are in flight once the socket has taken the
    /// stream up to `written`.
    fn count(&mut self, written: u64) -> usize {
        while self.unwritten.front().is_some_and(|&end| end <= written) {
            self.unwritten.pop_front();
        }
        self.unanswered + self.unwritten.len()
    }

    fn forwarded(&mut self) {
        self.unanswered += 1;
    }

    /// An answer arrived; `end` is where it ends in the stream, or `None`
    /// when it was not written (the session is closing).
    fn answered(&mut self, end: Option<u64>) {
        self.unanswered = self.unanswered.saturating_sub(1);
        self.unwritten.extend(end);
    }
}

impl<W: AsyncWrite + Unpin + 'static> ClientSession<W> {
    /// Starts a session over a connection's two halves.
    pub fn start<R: AsyncRead + Unpin + 'static>(
        read: R,
        write: W,
        coordinator: Addr<Coordinator>,
        conn: SessionContext,
    ) -> Addr<Self> {
        ClientSession::create(|ctx| {
            let log = conn.log.clone();
            ClientSession {
                coordinator,
                io: SessionIo::open(read, write, conn, log, ctx),
                in_flight: InFlight::default(),
                last_request: Instant::now(),
            }
        })
    }

    /// Checks again after `after`, or not at all without an idle timeout.
    fn arm_idle_timer(&self, after: Duration, ctx: &mut Context<Self>) {
        if self.io.policy().idle_timeout.is_some() {
            ctx.run_later(after, |act, ctx| act.check_idle(ctx));
        }
    }

    /// Closes a connection that has had no request for the idle timeout and
    /// has none in flight (an answer still being computed or written counts
    /// as activity); otherwise re-arms for when it would be idle that long.
    fn check_idle(&mut self, ctx: &mut Context<Self>) {
        let Some(timeout) = self.io.policy().idle_timeout else {
            return;
        };
        if self.io.is_closing() {
            return;
        }
        let now = Instant::now();
        if self.in_flight.count(self.io.written()) > 0 {
            self.last_request = now;
        }
        let idle = now.saturating_duration_since(self.last_request);
        if idle < timeout {
            return self.arm_idle_timer(timeout - idle, ctx);
        }
        let message = format!(
            "{IDLE_CLOSED}: no request for client-idle-timeout-millis ({}); \
             send Ping to keep a connection open",
            timeout.as_millis()
        );
        self.io.close_with_error_bounded(message, ctx);
    }

    fn request(&mut self, request_id: u64, request: ClientRequest, ctx: &mut Context<Self>) {
        self.last_request = Instant::now();
        match request {
            ClientRequest::Ping => {
                self.io.write(CoordinatorToClient::Response {
                    request_id,
                    response: ClientResponse::Pong,
                });
            }
            request => self.forward(request_id, request, ctx),
        }
    }

    fn forward(&mut self, request_id: u64, mut request: ClientRequest, ctx: &mut Context<Self>) {
        debug!(self.io.log(), "client request"; "request_id" => request_id);
        if let ClientRequest::ReadChunk { max_bytes, .. } = &mut request {
            let most = fit::max_chunk_bytes(self.io.policy().max_frame_bytes);
            *max_bytes = (*max_bytes).min(u32::try_from(most).unwrap_or(u32::MAX));
        }
        if let ClientRequest::SubmitBatch(reqs) = &request {
            let most = fit::max_batch_submissions(self.io.policy().max_frame_bytes);
            if reqs.len() > most {
                let reason = format!(
                    "SubmitBatch of {} submissions: at most {most} fit one answer within \
                     max-frame-bytes ({}); nothing was submitted, send smaller batches",
                    reqs.len(),
                    self.io.policy().max_frame_bytes
                );
                self.io.write(CoordinatorToClient::Response {
                    request_id,
                    response: ClientResponse::Overloaded { reason },
                });
                return;
            }
        }
        let limit = self.io.policy().max_in_flight;
        if self.in_flight.count(self.io.written()) >= limit {
            let reason = format!("max-in-flight-requests ({limit}) reached on this connection");
            self.io.write(CoordinatorToClient::Response {
                request_id,
                response: ClientResponse::Overloaded { reason },
            });
            return;
        }
        self.in_flight.forwarded();
        let command = ClientCommand {
            reply_to: ctx.address().recipient(),
            request_id,
            request,
            peer: None,
        };
        // send + wait: a client flooding requests waits for mailbox room
        // instead of growing the coordinator's queue without bound.
        let sent = self
            .coordinator
            .send(command)
            .into_actor(self)
            .map(|result, act, _| {
                if result.is_err() {
                    act.io
                        .close_with_error("coordinator is shutting down".into());
                }
            });
        ctx.wait(sent);
    }
}

impl<W: AsyncWrite + Unpin + 'static> Actor for ClientSession<W> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.io.arm_handshake_timer(ctx, |act| &mut act.io);
        if let Some(timeout) = self.io.policy().idle_timeout {
            self.arm_idle_timer(timeout, ctx);
        }
    }
}

impl<W: AsyncWrite + Unpin + 'static> StreamHandler<Result<ClientMessage, ProtocolError>>
    for ClientSession<W>
{
    fn handle(&mut self, item: Result<ClientMessage, ProtocolError>, ctx: &mut Context<Self>) {
        match (self.io.phase(), item) {
            (Phase::Closing, _) => {}
            (_, Err(e)) => self.io.close_with_error(e.to_string()),
            (Phase::AwaitingHello, Ok(ClientMessage::Hello(h))) => {
                match self.io.policy().check_hello(&h) {
                    Ok(()) => {
                        let hello = self.io.policy().hello();
                        self.io.write(CoordinatorToClient::Hello(hello));
                        self.io.set_phase(Phase::Ready);
                    }
                    Err(message) => self.io.close_with_error(message),
                }
            }
            (
                Phase::Ready,
                Ok(ClientMessage::Request {
                    request_id,
                    request,
                }),
            ) => self.request(request_id, request, ctx),
            (_, Ok(_)) => self.io.close_with_error(
                "unexpected frame: a client sends Hello first, then Requests".into(),
            ),
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        self.io.input_ended(ctx);
    }
}

impl<W: AsyncWrite + Unpin + 'static> WriteHandler<ProtocolError> for ClientSession<W> {
    fn error(&mut self, err: ProtocolError, _: &mut Context<Self>) -> Running {
        self.io.write_failed(&err)
    }
}

impl<W: AsyncWrite + Unpin + 'static> Handler<ClientAnswer> for ClientSession<W> {
    type Result = ();

    /// The answer is cut to fit one frame first (see `protocol::fit`), so
    /// no job, however large, makes its answer unsendable.
    fn handle(&mut self, m: ClientAnswer, _: &mut Context<Self>) {
        let end = (!self.io.is_closing()).then(|| {
            let response = fit::fit_response(m.response, self.io.policy().max_frame_bytes);
            self.io.write(CoordinatorToClient::Response {
                request_id: m.request_id,
                response,
            })
        });
        self.in_flight.answered(end);
    }
}

#[cfg(test)]
mod tests {
    use super::InFlight;

    #[test]
    fn an_answer_counts_until_the_socket_has_taken_all_of_it() {
        let mut in_flight = InFlight::default();
        in_flight.forwarded();
        in_flight.forwarded();
        assert_eq!(in_flight.count(0), 2);
        in_flight.answered(Some(100));
        in_flight.answered(None);
        assert_eq!(in_flight.count(99), 1);
        assert_eq!(in_flight.count(100), 0);
    }
}
