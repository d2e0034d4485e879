//! `ClientSession`: one per client connection. Forwards each request to the
//! coordinator and writes each answer the outbox releases to it.

use crate::actors::coordinator::{ClientCommand, Coordinator};
use crate::actors::handshake::{check_hello, hello};
use crate::actors::outbox::ClientAnswer;
use crate::protocol::{ClientMessage, CoordinatorToClient, FrameCodec, ProtocolError, Role};
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
    log: Logger,
}

impl<W: AsyncWrite + Unpin + 'static> ClientSession<W> {
    /// Starts a session over a connection's two halves.
    pub fn start<R: AsyncRead + Unpin + 'static>(
        read: R,
        write: W,
        coordinator: Addr<Coordinator>,
        max_frame_bytes: usize,
        log: Logger,
    ) -> Addr<Self> {
        ClientSession::create(|ctx| {
            ctx.add_stream(FramedRead::new(
                read,
                FrameCodec::<ClientMessage, CoordinatorToClient>::new(max_frame_bytes),
            ));
            ClientSession {
                coordinator,
                writer: FramedWrite::new(write, FrameCodec::new(max_frame_bytes), ctx),
                phase: Phase::AwaitingHello,
                log,
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

    fn forward(
        &mut self,
        request_id: u64,
        request: crate::protocol::ClientRequest,
        ctx: &mut Context<Self>,
    ) {
        debug!(self.log, "client request"; "request_id" => request_id);
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
}

impl<W: AsyncWrite + Unpin + 'static> StreamHandler<Result<ClientMessage, ProtocolError>>
    for ClientSession<W>
{
    fn handle(&mut self, item: Result<ClientMessage, ProtocolError>, ctx: &mut Context<Self>) {
        match (self.phase, item) {
            (Phase::Closing, _) => {}
            (_, Err(e)) => self.close_with_error(e.to_string()),
            (Phase::AwaitingHello, Ok(ClientMessage::Hello(h))) => {
                match check_hello(&h, Role::Client) {
                    Ok(()) => {
                        self.write(CoordinatorToClient::Hello(hello(Role::Client)));
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
        if self.phase != Phase::Closing {
            self.write(CoordinatorToClient::Response {
                request_id: m.request_id,
                response: m.response,
            });
        }
    }
}
