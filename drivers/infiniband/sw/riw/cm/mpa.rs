// SPDX-License-Identifier: GPL-2.0

//! The MPA exchange of a connection: our settings, the frame we send and the peer's we
//! read, until the negotiated parameters are known; the bytes that came after the peer's
//! frame then go to the connection.

use crate::kernel_ext::params;
use crate::kernel_ext::socket::{SocketHandler, TcpStream};
use crate::limits::LIMITS;
use crate::proto::mpa::{MPA_MAX_FRAME_LEN, MPA_MAX_IRD_ORD};
use crate::proto::{
    Error as WireError, FrameKind, MpaConfig, MpaFrame, MpaFrameParser, MpaRevision, RtrMode,
    RtrModes,
};
use crate::rx::MpaInput;
use kernel::prelude::*;

/// Ready-to-receive messages riw takes as responder: a zero-length Write, as it sends
/// itself, or a zero-length Read, the default of Chelsio's initiators.
pub(super) const RESPONDER_RTR: RtrModes = RtrModes {
    write: true,
    read: true,
    send: false,
};

/// Our MPA settings for a new connection.
pub(super) fn mpa_config(ird: u32, ord: u32, peer_to_peer: bool) -> MpaConfig {
    let max = u32::from(MPA_MAX_IRD_ORD);
    MpaConfig {
        revision: MpaRevision::V2,
        crc: params::mpa_crc_required(),
        ird: ird.min(LIMITS.max_qp_rd_atom).min(max) as u16,
        ird_max: LIMITS.max_qp_rd_atom.min(max) as u16,
        ord: ord.min(LIMITS.max_qp_init_rd_atom).min(max) as u16,
        peer_to_peer,
        // Zero-length RDMA Write, the one riw sends and takes.
        rtr: RtrModes::only(RtrMode::Write),
        // riw takes FPDUs of any size; it sends larger ones than a segment only to a peer
        // that says the same.
        large_fpdus: true,
    }
}

/// How reading the peer's MPA frame went.
pub(super) enum Read {
    /// The frame is complete (`Handshake::frame`).
    Complete,
    /// More bytes are needed; the socket's callbacks bring us back.
    More,
    /// The peer closed.
    Closed,
    /// The socket failed.
    Lost(Error),
    /// The bytes are no MPA frame we take.
    Invalid(WireError),
}

/// One side of an MPA exchange.
pub(super) struct Handshake {
    pub(super) config: MpaConfig,
    parser: KBox<MpaFrameParser>,
    /// An MPA frame being sent, its length and how much of it went.
    out: [u8; MPA_MAX_FRAME_LEN],
    out_len: usize,
    out_sent: usize,
    /// What was read from the socket: the peer's frame, and what follows it.
    input: MpaInput,
}

impl Handshake {
    /// An exchange with our `config`, reading the peer's frame of `kind`.
    pub(super) fn new(config: MpaConfig, kind: FrameKind) -> Result<Self> {
        let input = MpaInput::new()?;
        let parser = KBox::new(MpaFrameParser::new(kind), GFP_KERNEL)?;
        Ok(Self {
            config,
            parser,
            out: [0; MPA_MAX_FRAME_LEN],
            out_len: 0,
            out_sent: 0,
            input,
        })
    }

    /// The peer's frame, once complete.
    pub(super) fn frame(&self) -> Option<MpaFrame<'_>> {
        self.parser.frame()
    }

    /// Sends `frame` next (`flush`).
    pub(super) fn queue(&mut self, frame: &[u8]) -> Result {
        self.out
            .get_mut(..frame.len())
            .ok_or(EINVAL)?
            .copy_from_slice(frame);
        self.out_len = frame.len();
        self.out_sent = 0;
        Ok(())
    }

    /// Whether part of our frame waits to be sent.
    pub(super) fn sending(&self) -> bool {
        self.out_sent < self.out_len
    }

    /// Sends what is left of our frame; false if the socket is full or failed.
    pub(super) fn flush<H: SocketHandler>(&mut self, sock: Option<&TcpStream<H>>) -> bool {
        let Some(sock) = sock else {
            return false;
        };
        while self.out_sent < self.out_len {
            match sock.send(&self.out[self.out_sent..self.out_len], false) {
                Ok(n) => self.out_sent += n,
                Err(_) => return false,
            }
        }
        true
    }

    /// Reads the peer's frame from the socket, as far as it came.
    pub(super) fn read<H: SocketHandler>(&mut self, sock: &TcpStream<H>) -> Read {
        loop {
            let progress = match self.input.fill(sock) {
                Ok(None) => return Read::Closed,
                Ok(Some([])) => return Read::More,
                Ok(Some(bytes)) => self.parser.feed(bytes),
                Err(e) => return Read::Lost(e),
            };
            match progress {
                Ok(p) => {
                    self.input.consume(p.consumed);
                    if p.complete {
                        return Read::Complete;
                    }
                }
                Err(why) => return Read::Invalid(why),
            }
        }
    }

    /// The exchange is over: what came after the peer's frame, for the connection.
    pub(super) fn leftover(&mut self) -> MpaInput {
        self.input.take()
    }
}
