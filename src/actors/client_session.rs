//! `ClientSession`: one per client connection. Forwards each request to the
//! coordinator and writes each answer the outbox releases to it.

use crate::actors::coordinator::{ClientCommand, Coordinator};
use crate::actors::handshake::SessionContext;
use crate::actors::outbox::ClientAnswer;
use crate::protocol::{
    ClientMessage, ClientRequest, ClientResponse, CoordinatorToClient, FrameCodec, ProtocolError,
};
use actix::io::{FramedWrite, WriteHandler};
use actix::{
    Actor, ActorContext, ActorFutureExt, Addr, AsyncContext, Context, Handler, Running,
    StreamHandler, WrapFuture,
};
use slog::{debug, warn, Logger};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::FramedRead;

type Writer<W> =
    FramedWrite<CoordinatorToClient, W, FrameCodec<ClientMessage, CoordinatorToClient>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitingHello,
    Ready,
    Closing,
}

/// See the module documentation.
pub struct ClientSession<W: AsyncWrite + Unpin + 'static> {
    coordinator: Addr<Coordinator>,
    writer: Writer<W>,
    phase: Phase,
    /// Requests forwarded whose answers have not been written yet.
    in_flight: usize,
    conn: SessionContext,
    log: Logger,
}

impl<W: AsyncWrite + Unpin + 'static> ClientSession<W> {
    /// Starts a session over a connection's two halves.
    pub fn start<R: AsyncRead + Unpin + 'static>(
        read: R,
        write: W,
        coordinator: Addr<Coordinator>,
        conn: SessionContext,
    ) -> Addr<Self> {
        let max_frame_bytes = conn.policy.max_frame_bytes;
        ClientSession::create(|ctx| {
            ctx.add_stream(FramedRead::new(
                read,
                FrameCodec::<ClientMessage, CoordinatorToClient>::new(max_frame_bytes),
            ));
            ClientSession {
                coordinator,
                writer: FramedWrite::new(write, FrameCodec::new(max_frame_bytes), ctx),
                phase: Phase::AwaitingHello,
                in_flight: 0,
                log: conn.log.clone(),
                conn,
            }
        })
    }

    fn write(&mut self, frame: CoordinatorToClient) {
        // Encoding errors reach WriteHandler::error, which ends the session.
        self.writer.write(frame);
    }

    /// Sends an error frame, then closes once it is flushed.
    fn close_with_error(&mut self, message: String) {
        warn!(self.log, "closing client connection"; "reason" => &message);
        self.write(CoordinatorToClient::Error { message });
        self.phase = Phase::Closing;
        self.writer.close();
    }

    fn forward(&mut self, request_id: u64, request: ClientRequest, ctx: &mut Context<Self>) {
        debug!(self.log, "client request"; "request_id" => request_id);
        let limit = self.conn.policy.max_in_flight;
        if self.in_flight >= limit {
            let reason = format!("max-in-flight-requests ({limit}) reached on this connection");
            self.write(CoordinatorToClient::Response {
                request_id,
                response: ClientResponse::Overloaded { reason },
            });
            return;
        }
        self.in_flight += 1;
        let command = ClientCommand {
            reply_to: ctx.address().recipient(),
            request_id,
            request,
        };
        // send + wait: a client flooding requests waits for mailbox room
        // instead of growing the coordinator's queue without bound.
        let sent = self
            .coordinator
            .send(command)
            .into_actor(self)
            .map(|result, act, _| {
                if result.is_err() {
                    act.close_with_error("coordinator is shutting down".into());
                }
            });
        ctx.wait(sent);
    }
}

impl<W: AsyncWrite + Unpin + 'static> Actor for ClientSession<W> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_later(self.conn.policy.handshake_timeout, |act, _| {
            if act.phase == Phase::AwaitingHello {
                act.close_with_error(act.conn.handshake_expired());
            }
        });
    }
}

impl<W: AsyncWrite + Unpin + 'static> StreamHandler<Result<ClientMessage, ProtocolError>>
    for ClientSession<W>
{
    fn handle(&mut self, item: Result<ClientMessage, ProtocolError>, ctx: &mut Context<Self>) {
        match (self.phase, item) {
            (Phase::Closing, _) => {}
            (_, Err(e)) => self.close_with_error(e.to_string()),
            (Phase::AwaitingHello, Ok(ClientMessage::Hello(h))) => {
                match self.conn.policy.check_hello(&h) {
                    Ok(()) => {
                        self.write(CoordinatorToClient::Hello(self.conn.policy.hello()));
                        self.phase = Phase::Ready;
                    }
                    Err(message) => self.close_with_error(message),
                }
            }
            (
                Phase::Ready,
                Ok(ClientMessage::Request {
                    request_id,
                    request,
                }),
            ) => self.forward(request_id, request, ctx),
            (_, Ok(_)) => self.close_with_error(
                "unexpected frame: a client sends Hello first, then Requests".into(),
            ),
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        if self.phase != Phase::Closing {
            ctx.stop();
        }
    }
}

impl<W: AsyncWrite + Unpin + 'static> WriteHandler<ProtocolError> for ClientSession<W> {
    fn error(&mut self, err: ProtocolError, _: &mut Context<Self>) -> Running {
        warn!(self.log, "client connection write failed"; "error" => %err);
        Running::Stop
    }
}

impl<W: AsyncWrite + Unpin + 'static> Handler<ClientAnswer> for ClientSession<W> {
    type Result = ();

    fn handle(&mut self, m: ClientAnswer, _: &mut Context<Self>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.phase != Phase::Closing {
            self.write(CoordinatorToClient::Response {
                request_id: m.request_id,
                response: m.response,
            });
        }
    }
}
