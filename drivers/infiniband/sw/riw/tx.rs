// SPDX-License-Identifier: GPL-2.0

//! The send side of a connection: work requests taken from the send queue (copied once
//! out of the shared ring and validated), segmented into FPDUs no larger than the path
//! allows, handed to the socket without blocking, and completed into the send CQ.
//!
//! A message from registered user memory of at least `tx_zerocopy_min` bytes goes
//! zero-copy: each FPDU's header and trailer are copied, its payload is handed to TCP as
//! references to the pinned pages, and the work completes only once TCP released them
//! (acknowledged), so the consumer cannot change bytes TCP may still have to retransmit.
//!
//! As on the receive side, the small steps of each message's path are `#[inline(always)]`
//! (see `rx`).

use crate::crc::KernelCrc32c;
use crate::device::RiwDevice;
use crate::kernel_ext::params;
use crate::kernel_ext::rdma::{access, Device, KernelPieces, Qp, UserMemory};
use crate::kernel_ext::socket::{SocketHandler, TcpStream, ZeroCopyOwner, ZeroCopyTicket};
use crate::kernel_ext::trace;
use crate::kernel_ext::uapi::{SqeExt, INLINE_AREA};
use crate::limits::MAX_MSG_SIZE;
use crate::mr::{pd_id, MemRegion, RiwMr};
use crate::proto::encode_fpdu;
use crate::proto::fpdu::max_ulpdu_for_mss;
use crate::proto::{
    FpduHeader, FpduWriter, Opcode, Placement, RdmapHeader, ReadRequest, Segment, SegmentHeader,
    Segmenter, Terminate, MAX_FRAME_HEADER_LEN, MAX_TRAILER_LEN, QUEUE_READ_REQUEST, QUEUE_SEND,
};
use crate::qp::RiwQp;
use crate::reads::{complete_send, InboundRead, ReadSink, Reads, SendWork, WorkLimits};
use crate::stats::Stat;
use crate::uapi;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The sink STag of a zero-length Read, which has no local buffer: never 0.
const ZERO_READ_SINK_STAG: u32 = 1;

/// Copied FPDUs are framed together, up to this many bytes (or two of the largest FPDUs),
/// and handed to the socket in one call: those of one message, so that one FPDU per TCP
/// segment costs no more calls than FPDUs of many segments, and, toward a peer that took
/// FPDUs of several segments, those of the messages that follow while the send queue held
/// more at each take (small FPDUs then share TCP segments).
const TX_BATCH_BYTES: usize = 16384;

/// TCP segments an FPDU may span toward a peer that agreed to larger FPDUs in the MPA
/// exchange (about 16 KiB over a 1500-byte MTU).
const LARGE_FPDU_SEGMENTS: u32 = 11;

/// How a send run ended.
pub(crate) enum TxEnd {
    /// The send queue is empty and everything went to the socket.
    Idle,
    /// The socket is full; its write-space callback resumes us.
    Blocked,
    /// The budget is used up; more may be waiting.
    Budget,
    /// A work request failed locally (completed in error): the connection ends.
    LocalError,
    /// The socket failed.
    SocketError(Error),
}

/// Where a message's payload comes from.
enum Source {
    /// A checked element of a registered region.
    Region {
        region: Arc<MemRegion>,
        addr: u64,
        len: u32,
    },
    /// An element of a registered region in domain `pd`, for a message that is copied:
    /// looked up and checked when its bytes are, and only borrowed for that.
    Borrowed {
        stag: u32,
        pd: usize,
        addr: u64,
        len: u32,
    },
    /// Inline data, copied into the work request at post time.
    Inline { len: u32 },
}

/// The payload sources of a message: at most one per SGE.
struct Sources {
    items: [Option<Source>; uapi::SIW_MAX_SGE as usize],
    len: usize,
}

impl Sources {
    fn new() -> Self {
        Self {
            items: core::array::from_fn(|_| None),
            len: 0,
        }
    }

    fn push(&mut self, source: Source) -> Result {
        *self.items.get_mut(self.len).ok_or(EINVAL)? = Some(source);
        self.len += 1;
        Ok(())
    }

    /// Drops every source (the region references go).
    #[inline(always)]
    fn clear(&mut self) {
        for item in self.items.iter_mut().take(self.len) {
            *item = None;
        }
        self.len = 0;
    }

    /// Takes the first source out, dropping the others.
    fn take_first(&mut self) -> Option<Source> {
        let first = self.items.first_mut().and_then(Option::take);
        self.clear();
        first
    }

    fn iter(&self) -> impl Iterator<Item = &Source> {
        self.items.iter().take(self.len).flatten()
    }

    /// The source holding byte `offset` of the payload, and the offset within it.
    fn at(&self, mut offset: u32) -> Option<(&Source, u32)> {
        for s in self.iter() {
            if offset < s.len() {
                return Some((s, offset));
            }
            offset -= s.len();
        }
        None
    }

    /// The source pieces of `len` payload bytes at `offset`, in order.
    #[inline(always)]
    fn pieces(&self, offset: u32, len: usize) -> Pieces<'_> {
        Pieces {
            sources: self,
            offset,
            left: len,
        }
    }
}

/// Iterator over the source pieces of a stretch of payload: `(source, offset in it,
/// length)`, or one `EINVAL` if the sources end before the stretch does.
struct Pieces<'a> {
    sources: &'a Sources,
    offset: u32,
    left: usize,
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Result<(&'a Source, u32, usize)>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let Some((source, at)) = self.sources.at(self.offset) else {
            self.left = 0;
            return Some(Err(EINVAL));
        };
        let n = ((source.len() - at) as usize).min(self.left);
        self.left -= n;
        self.offset += n as u32;
        Some(Ok((source, at, n)))
    }
}

/// What a message is for.
enum Origin {
    /// Send or RDMA Write work.
    Work(SendWork),
    /// The Request of RDMA Read work.
    Read(SendWork, ReadSink),
    /// The response to a Read Request of the peer.
    Response,
}

/// A message being sent FPDU by FPDU; its headers, payload sources and inline data are
/// the sender's `template`, `sources` and `inline`, filled in place (nothing large moves
/// on the way). A copied message that fits one FPDU needs none: it is framed at once.
struct Message {
    origin: Origin,
    segments: Segmenter,
    /// Sent zero-copy: the ticket and its token.
    zero_copy: Option<(ZeroCopyTicket, u64)>,
    /// A Read Response from kernel memory whose pages go to TCP by reference (see
    /// `splices`).
    spliced: bool,
}

/// Send state of a connection, by role: the frame in flight, the message being built,
/// and what goes next.
pub(crate) struct Sender {
    out: Frame,
    msg: Building,
    sched: Schedule,
}

/// The frame being handed to the socket, and the work it completes.
struct Frame {
    /// The FPDU being handed to the socket: `buf[..head]`, then, if the payload goes
    /// zero-copy, `zero_copy_len` bytes of the message at `payload_offset`, then
    /// `buf[head..len]` (its trailer). `sent` counts what went, in that order. Copied
    /// FPDUs of one message are framed one after the other, up to the buffer's size,
    /// before they go (`head` is then `len`). TCP copies the frame bytes.
    buf: KVVec<u8>,
    head: usize,
    len: usize,
    zero_copy_len: usize,
    payload_offset: u32,
    sent: usize,
    /// More of the frame's message follows it: the socket may hold it back to fill a
    /// segment (the last FPDU of a message goes out at once).
    more: bool,
    /// The ticket of the frame's zero-copy payload, once its message is done (the frame
    /// was its last): kept, with `sources`, until the frame has gone.
    ticket: Option<ZeroCopyTicket>,
    /// Send or Write work whose last FPDU is the frame: it completes once the frame has
    /// gone to the socket, not before (nor on the critical path of the message).
    unreported: Option<SendWork>,
}

/// The message being built into FPDUs, and the connection's framing parameters.
struct Building {
    crc: bool,
    /// The peer agreed to FPDUs of several segments: FPDUs of several messages may be
    /// framed together (see `TX_BATCH_BYTES`). Otherwise every FPDU starts a TCP segment,
    /// so the bytes that end one end a record to TCP, which would otherwise add the next
    /// FPDU to a segment it has not sent yet (one that waits for the congestion window,
    /// or for the device to take the one before).
    batch_messages: bool,
    max_ulpdu: u16,
    /// The most buffer bytes one FPDU takes.
    max_frame: usize,
    /// Next MSN on the Send queue.
    send_msn: u32,
    /// Next MSN on the Read Request queue.
    read_msn: u32,
    /// The token of the next zero-copy ticket.
    next_token: u64,
    message: Option<Message>,
    /// The current message's headers: the DDP header of its first segment, and the RDMAP
    /// header every segment carries.
    template: FpduHeader,
    /// Where the current message's payload comes from.
    sources: Sources,
    /// The current message's inline data.
    inline: [u8; INLINE_AREA],
}

/// What the sender takes next: send work or Read responses, and what holds it back.
struct Schedule {
    /// The send queue entry last taken from the ring, copied out once.
    sqe: uapi::siw_sqe,
    /// `sqe` is send work that waits for Reads (ORD, or a fence).
    held: bool,
    /// The connection's ORD.
    ord: u32,
    /// Work of ours may wait in the Read state (see `Reads::has_pending`). Only the
    /// sender adds such work: while this is false, the Read state holds none, and the
    /// doorbell's sender decides without its lock. A look under the lock clears it.
    pending: bool,
    /// Which queue goes first at the next message boundary: responses or send work.
    respond_first: bool,
    /// The send queue's entry after the one last taken was posted when it was taken.
    ring_more: bool,
}

/// What a connection's sender works for: its socket and its owner (which zero-copy
/// tickets report to), both of one type.
pub(crate) trait Owner: SocketHandler + ZeroCopyOwner {}

impl<T: SocketHandler + ZeroCopyOwner> Owner for T {}

/// What a send run works with, besides the sender's own state.
pub(crate) struct TxContext<'a, H: SocketHandler, S> {
    pub(crate) sock: &'a TcpStream<H>,
    pub(crate) owner: &'a Arc<H>,
    pub(crate) dev: &'a Device<RiwDevice>,
    pub(crate) qp: &'a Qp<RiwDevice>,
    /// The state shared with the receiver.
    pub(crate) shared: &'a S,
    pub(crate) wake: Wake,
}

impl<H: SocketHandler, S> Clone for TxContext<'_, H, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H: SocketHandler, S> Copy for TxContext<'_, H, S> {}

/// What runs the sender.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The user library's doorbell, for send work. Read Requests that come meanwhile are
    /// left to the work item, which the receiver wakes for each.
    Doorbell,
    /// The connection's work item: Read responses and send work.
    WorkItem,
}

impl Frame {
    fn total(&self) -> usize {
        self.len + self.zero_copy_len
    }

    /// A frame of `len` bytes, all of it in the frame buffer.
    fn set(&mut self, len: usize) {
        self.head = len;
        self.len = len;
        self.zero_copy_len = 0;
        self.sent = 0;
    }

    /// Hands frame bytes `from..to` to the socket. `record_end`: they end an FPDU that
    /// must end a TCP segment.
    #[inline(always)]
    fn send<H: SocketHandler>(
        &self,
        sock: &TcpStream<H>,
        from: usize,
        to: usize,
        more: bool,
        record_end: bool,
    ) -> Result<usize> {
        let bytes = self.buf.get(from..to).ok_or(EINVAL)?;
        if record_end {
            sock.send_record_end(bytes, more)
        } else {
            sock.send(bytes, more)
        }
    }
}

impl Sender {
    /// A sender for a connection with CRC on or off, over a path of `mss`-byte segments.
    /// Each FPDU fits one segment (the MULPDU of RFC 5044) unless the peer agreed to
    /// `large_fpdus` in the MPA exchange, or the operator set `fpdu_segments`.
    pub(crate) fn new(crc: bool, mss: u32, ord: u32, large_fpdus: bool) -> Result<Self> {
        let segments =
            params::fpdu_segments().unwrap_or(if large_fpdus { LARGE_FPDU_SEGMENTS } else { 1 });
        let max_ulpdu = max_ulpdu_for_mss(mss.max(128).saturating_mul(segments));
        let max_frame = MAX_FRAME_HEADER_LEN + usize::from(max_ulpdu) + MAX_TRAILER_LEN;
        let buf = KVVec::from_elem(0u8, (2 * max_frame).max(TX_BATCH_BYTES), GFP_KERNEL)?;
        Ok(Self {
            out: Frame {
                buf,
                head: 0,
                len: 0,
                zero_copy_len: 0,
                payload_offset: 0,
                sent: 0,
                more: false,
                ticket: None,
                unreported: None,
            },
            msg: Building {
                crc,
                batch_messages: segments > 1,
                max_ulpdu,
                max_frame,
                send_msn: 1,
                read_msn: 1,
                next_token: 0,
                message: None,
                template: FpduHeader::new(SegmentHeader {
                    opcode: Opcode::Send,
                    last: true,
                    placement: Placement::Untagged {
                        inval_stag: 0,
                        queue: QUEUE_SEND,
                        msn: 0,
                        mo: 0,
                    },
                }),
                sources: Sources::new(),
                inline: [0; INLINE_AREA],
            },
            sched: Schedule {
                sqe: uapi::siw_sqe::default(),
                held: false,
                ord,
                pending: false,
                respond_first: false,
                ring_more: false,
            },
        })
    }

    /// The largest ULPDU an FPDU carries (MULPDU).
    pub(crate) fn max_ulpdu(&self) -> u32 {
        self.msg.max_ulpdu.into()
    }

    /// Whether nothing is half-sent or held.
    pub(crate) fn is_idle(&self) -> bool {
        self.msg.message.is_none() && !self.sched.held && self.out.sent == self.out.total()
    }

    /// Whether the next FPDU is framed behind the copied ones waiting in the buffer,
    /// rather than those going first: nothing of the buffer went yet, another FPDU fits,
    /// the budget allows one, and either more of the current message follows or, between
    /// messages toward a peer that takes several per segment, the send queue held another
    /// entry at the last take (not one held back for Reads). Copied FPDUs of a new message
    /// with several FPDUs, or zero-copy ones, are not framed behind others.
    #[inline(always)]
    fn batching(&self, budget: u32) -> bool {
        let room = self.out.zero_copy_len == 0
            && self.out.sent == 0
            && budget != 0
            && self.out.len + self.msg.max_frame <= self.out.buf.len();
        room && match self.msg.message {
            Some(_) => self.out.more,
            None => self.msg.batch_messages && self.sched.ring_more && !self.sched.held,
        }
    }

    /// Hands the rest of the current FPDU to the socket.
    #[inline(always)]
    fn push<H: SocketHandler>(&mut self, sock: &TcpStream<H>, more: bool) -> Result<bool> {
        loop {
            let total = self.out.total();
            let payload_end = self.out.head + self.out.zero_copy_len;
            let sent = if self.out.sent >= total {
                // The last frame of a zero-copy message is gone: so is its payload.
                if self.out.ticket.take().is_some() {
                    self.msg.sources.clear();
                }
                return Ok(true);
            } else if self.out.sent < self.out.head {
                let (from, to) = (self.out.sent, self.out.head);
                let record_end = to == total && !self.msg.batch_messages;
                self.out.send(sock, from, to, more || to < total, record_end)
            } else if self.out.sent < payload_end {
                let done = self.out.sent - self.out.head;
                self.send_payload(sock, done, self.out.zero_copy_len - done)
            } else {
                let at = self.out.sent - self.out.zero_copy_len;
                let len = self.out.len;
                self.out.send(sock, at, len, more, !self.msg.batch_messages)
            };
            match sent {
                Ok(n) => self.out.sent += n,
                Err(e) if e == EAGAIN => return Ok(false),
                Err(e) => return Err(e),
            }
        }
    }

    /// Hands payload bytes `done..done + len` of the current frame to the socket
    /// zero-copy (from one source at most): pinned user memory with the message's ticket,
    /// or the kernel pages of a spliced Read Response.
    fn send_payload<H: SocketHandler>(
        &self,
        sock: &TcpStream<H>,
        done: usize,
        len: usize,
    ) -> Result<usize> {
        let offset = self.out.payload_offset + u32::try_from(done)?;
        let (source, at) = self.msg.sources.at(offset).ok_or(EINVAL)?;
        let n = ((source.len() - at) as usize).min(len);
        let Some((mem, mem_offset)) = source.user_memory(at) else {
            let (region, addr) = source.kernel_memory(at).ok_or(EINVAL)?;
            let mut pieces = KernelPieces::new();
            region.kernel_pieces(addr, n, &mut pieces)?;
            return sock.send_pieces(&pieces, true);
        };
        let ticket = match (&self.out.ticket, &self.msg.message) {
            (Some(ticket), _) => ticket,
            (None, Some(m)) => &m.zero_copy.as_ref().ok_or(EINVAL)?.0,
            (None, None) => return Err(EINVAL),
        };
        match sock.send_user_memory(mem, mem_offset, n, ticket, true)? {
            // Out of the region's pages: a local fault, not a full socket.
            0 => Err(EFAULT),
            sent => Ok(sent),
        }
    }

    /// Sends Read responses and what the send queue holds, up to `budget` FPDUs.
    pub(crate) fn run<H: Owner, S: Shared>(
        &mut self,
        cx: &TxContext<'_, H, S>,
        mut budget: u32,
    ) -> TxEnd {
        let TxContext {
            sock,
            dev,
            qp,
            wake,
            ..
        } = *cx;
        if wake == Wake::Doorbell {
            self.sched.ring_more = true;
        }
        // The buffer's FPDUs go before anything more is framed: no message follows them
        // (`Idle` once they went), or the next one starts a buffer of its own.
        let mut push_now = false;
        loop {
            if self.out.sent < self.out.total() && (push_now || !self.batching(budget)) {
                match self.push(sock, self.out.more) {
                    Ok(true) => {
                        if let Some(work) = self.out.unreported.take() {
                            self.finished(cx, work);
                        }
                        // The message's regions are no longer needed: released off its path.
                        if self.msg.message.is_none() && self.out.ticket.is_none() {
                            self.msg.sources.clear();
                        }
                        if push_now && self.msg.message.is_none() {
                            return TxEnd::Idle;
                        }
                        push_now = false;
                    }
                    Ok(false) => return TxEnd::Blocked,
                    Err(e) => return TxEnd::SocketError(e),
                }
            }
            if budget == 0 {
                return TxEnd::Budget;
            }
            if self.msg.message.is_none() {
                // The doorbell's work is done once the ring had no more at the last take:
                // the library rings again for the next, and the Read state needs no look.
                if wake == Wake::Doorbell && !self.sched.ring_more && !self.sched.held {
                    return TxEnd::Idle;
                }
                // Another message is framed behind this one's last FPDU: the work that
                // FPDU completes is reported now (its payload is in the buffer), so that
                // whatever the next message completes comes after it.
                let waiting = self.out.sent < self.out.total();
                if waiting {
                    if let Some(work) = self.out.unreported.take() {
                        self.finished(cx, work);
                    }
                }
                match self.next_message(cx) {
                    // Zero-copy, or of several FPDUs: framed into an empty buffer.
                    Ok(true) if waiting && self.msg.message.is_some() => {
                        push_now = true;
                        continue;
                    }
                    Ok(true) => {}
                    Ok(false) if waiting => {
                        push_now = true;
                        continue;
                    }
                    Ok(false) => return TxEnd::Idle,
                    Err(()) => return TxEnd::LocalError,
                }
            }
            let Some(m) = self.msg.message.as_mut() else {
                // Framed at once: it goes next.
                budget -= 1;
                continue;
            };
            let Some(segment) = m.segments.next() else {
                if let Err(end) = self.finish_message(cx) {
                    return end;
                }
                continue;
            };
            let elsewhere = m.zero_copy.is_some() || m.spliced;
            if self.build(dev, &segment, elsewhere).is_err() {
                self.fail_message(qp, uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR);
                return TxEnd::LocalError;
            }
            budget -= 1;
            if segment.segment.last {
                if let Err(end) = self.finish_message(cx) {
                    return end;
                }
            }
        }
    }

    /// The last FPDU of the current message is built (its payload copied out, or its
    /// zero-copy payload kept with the frame): the message is done for the sender. The
    /// Read state learns of it before the frame goes, since the peer's answer may come at
    /// once (a Read Response, a new Read Request once it has a response); copied Send and
    /// Write work completes after it went.
    fn finish_message<H: Owner, S: Shared>(
        &mut self,
        cx: &TxContext<'_, H, S>,
    ) -> core::result::Result<(), TxEnd> {
        let qp = cx.qp;
        let Some(Message {
            origin, zero_copy, ..
        }) = self.msg.message.take()
        else {
            return Ok(());
        };
        let token = zero_copy.as_ref().map(|(_, token)| *token);
        if let Err(work) = self.framed(origin, token, cx) {
            complete_send(qp, &work, uapi::siw_wc_status_SIW_WC_LOC_QP_OP_ERR);
            return Err(TxEnd::LocalError);
        }
        // The work waits for the ticket's release now; the frame holds the ticket, and
        // the sources its payload comes from. A copied payload is in the frame already.
        if let Some((ticket, _)) = zero_copy {
            if self.out.zero_copy_len != 0 {
                self.out.ticket = Some(ticket);
            }
        }
        Ok(())
    }

    /// The last FPDU of a message for `origin` is framed (sent zero-copy with the ticket
    /// of `token`, if any): the work it is for goes where it waits. `Err` gives back Read
    /// work the Read state could not take.
    #[inline(always)]
    fn framed<H: Owner, S: Shared>(
        &mut self,
        origin: Origin,
        token: Option<u64>,
        cx: &TxContext<'_, H, S>,
    ) -> core::result::Result<(), SendWork> {
        let TxContext {
            qp,
            shared: inbound,
            ..
        } = *cx;
        match origin {
            Origin::Work(work) => match token {
                Some(token) => {
                    reads(inbound, |r| r.finished_zero_copy(qp, work, token));
                    self.sched.pending = true;
                }
                None => self.out.unreported = Some(work),
            },
            Origin::Read(work, sink) => {
                self.sched.pending = true;
                if reads(inbound, |r| r.read_sent(work, sink)).is_err() {
                    return Err(work);
                }
            }
            Origin::Response => reads(inbound, |r| r.responded()),
        }
        Ok(())
    }

    /// Send work has gone: it completes now, or behind the work that waits in the Read
    /// state (whose lock is needed only if some may).
    fn finished<H: Owner, S: Shared>(&mut self, cx: &TxContext<'_, H, S>, work: SendWork) {
        let TxContext {
            qp,
            shared: inbound,
            ..
        } = *cx;
        if !self.sched.pending {
            if work.signalled {
                complete_send(qp, &work, uapi::siw_wc_status_SIW_WC_SUCCESS);
            }
            return;
        }
        self.sched.pending = reads(inbound, |r| {
            r.finished(qp, work);
            r.has_pending()
        });
    }

    /// A zero-copy ticket for a message of `len` bytes from `sources`, if it should go
    /// zero-copy: large enough, all of it in registered user memory (pinned pages TCP may
    /// hold references to), on a connection whose route did not copy such pages before.
    /// Should no ticket be had, the message is copied.
    fn zero_copy<H: Owner, S: Shared>(
        &mut self,
        cx: &TxContext<'_, H, S>,
        len: u64,
    ) -> Option<(ZeroCopyTicket, u64)> {
        let min = params::tx_zerocopy_min();
        if min == 0
            || len < u64::from(min)
            || !self.msg.sources.iter().all(|s| s.user_memory(0).is_some())
        {
            return None;
        }
        if cx.shared.zero_copy_copied() && !params::tx_zerocopy_keep() {
            return None;
        }
        let token = self.msg.next_token;
        self.msg.next_token = token.wrapping_add(1);
        let ticket = ZeroCopyTicket::new(cx.owner.clone(), token).ok()?;
        cx.dev.stats.inc(Stat::ZeroCopySends);
        Some((ticket, token))
    }

    /// Whether a Read Response of `len` bytes from the sources goes with its pages handed
    /// to TCP by reference rather than copied twice (into the frame, then by TCP): large
    /// enough to go zero-copy, and all of it in a kernel consumer's memory. The consumer
    /// keeps that memory as it is until the peer has the data (the peer reports the Read
    /// done only then), so a retransmission sends the same bytes; TCP's page references
    /// keep the pages even if the region is invalidated meanwhile. Send and Write work
    /// is copied instead: it completes as soon as it went, and the consumer may reuse its
    /// buffer before TCP is done with it.
    fn splices(&self, len: u32) -> bool {
        let min = params::tx_zerocopy_min();
        min != 0
            && len >= min
            && self.msg.sources.len != 0
            && self
                .msg
                .sources
                .iter()
                .all(|s| s.kernel_memory(0).is_some())
    }

    /// Picks the next message, a Read response or send work (taking turns so neither
    /// starves the other), and plans it: true if there is one. `Err` once send work
    /// failed (and was completed in error).
    fn next_message<H: Owner, S: Shared>(
        &mut self,
        cx: &TxContext<'_, H, S>,
    ) -> core::result::Result<bool, ()> {
        let TxContext {
            dev,
            qp,
            shared: inbound,
            wake,
            ..
        } = *cx;
        self.sched.respond_first = !self.sched.respond_first;
        // Taking turns matters only while send work waits too: with none in the ring at
        // the last take (a doorbell since leaves a note, and the work item runs again),
        // a Read Request is answered at once, without a look at the ring first.
        let respond_first = self.sched.respond_first || (!self.sched.ring_more && !self.sched.held);
        loop {
            // One look at the Read state per decision: the receiver shares its lock, and
            // each taking costs (a message used to take it five times). Meanwhile the
            // receiver can only lift a limit (a Read answered, work released) and wakes
            // the sender when it does: a stale look defers work, never oversteps ORD or
            // a fence. The doorbell leaves Read Requests to the work item, so while no
            // work of ours waits there, it needs no look at all.
            let look = if wake == Wake::Doorbell && !self.sched.pending {
                Look::Work {
                    limits: WorkLimits::none_pending(self.sched.ord),
                    requests: false,
                }
            } else {
                let (look, pending) = reads(inbound, |r| {
                    let pending = r.has_pending();
                    if respond_first {
                        if let Some(request) = r.take_request() {
                            return (Look::Respond(request), pending);
                        }
                    }
                    let work = Look::Work {
                        limits: r.work_limits(),
                        requests: r.has_requests(),
                    };
                    (work, pending)
                });
                self.sched.pending = pending;
                look
            };
            let (limits, requests) = match look {
                Look::Respond(request) => {
                    return self.response(cx, request);
                }
                Look::Work { limits, requests } => (limits, requests),
            };
            if !self.next_work(qp, &limits, wake != Wake::Doorbell)? {
                // Stopped for a limit: a Read completing must wake us, unless one did
                // since the look. A full list of work to complete stops us only if more
                // work waits (a QP one deep fills it with every Read).
                let stopped = self.sched.held || (!limits.can_take && RiwQp::send_waiting(qp));
                if stopped && !reads(inbound, |r| r.sender_waits(limits)) {
                    continue;
                }
                if !requests {
                    return Ok(false);
                }
                return match reads(inbound, |r| r.take_request()) {
                    Some(request) => self.response(cx, request),
                    None => Ok(false),
                };
            }
            match local_operation(dev, qp, &self.sched.sqe) {
                Some(Ok(())) => {
                    self.finished(cx, SendWork::new(&self.sched.sqe, 0));
                    continue;
                }
                Some(Err(status)) => {
                    complete_send(qp, &SendWork::failed(&self.sched.sqe), status);
                    return Err(());
                }
                None => {}
            }
            return match self.start(cx) {
                Ok(()) => Ok(true),
                Err(status) => {
                    self.msg.sources.clear();
                    complete_send(qp, &SendWork::failed(&self.sched.sqe), status);
                    Err(())
                }
            };
        }
    }

    /// Takes the send queue's next work request into `sqe` (or the one held there) and
    /// tells whether it may start now under `limits`: one that must wait for Reads (ORD,
    /// fence) is held until a Read Response completes a Read. `Err` if it failed at once.
    fn next_work(
        &mut self,
        qp: &Qp<RiwDevice>,
        limits: &WorkLimits,
        idle_hands_back: bool,
    ) -> core::result::Result<bool, ()> {
        if !self.sched.held {
            if !limits.can_take {
                return Ok(false);
            }
            match RiwQp::take_send(qp, &mut self.sched.sqe, idle_hands_back) {
                Some(more) => {
                    self.sched.ring_more = more;
                    trace_taken(qp, &self.sched.sqe);
                }
                None => {
                    self.sched.ring_more = false;
                    return Ok(false);
                }
            }
        }
        self.sched.held = false;
        let sqe = &self.sched.sqe;
        let fenced = u32::from(sqe.flags) & uapi::siw_wqe_flags_SIW_WQE_READ_FENCE != 0;
        let is_read = matches!(
            u32::from(sqe.opcode),
            uapi::siw_opcode_SIW_OP_READ | uapi::siw_opcode_SIW_OP_READ_LOCAL_INV
        );
        if is_read && limits.may_read.is_none() {
            // ORD 0: the peer takes no Read Requests; sending one would only be refused.
            let status = uapi::siw_wc_status_SIW_WC_LOC_QP_OP_ERR;
            complete_send(qp, &SendWork::failed(sqe), status);
            return Err(());
        }
        if (fenced && limits.reads_waiting) || (is_read && limits.may_read == Some(false)) {
            self.sched.held = true;
            return Ok(false);
        }
        Ok(true)
    }

    /// Plans the response to a Read Request (checked when it arrived): true. `Err` if it
    /// cannot be sent (the connection ends).
    fn response<H: Owner, S: Shared>(
        &mut self,
        cx: &TxContext<'_, H, S>,
        request: InboundRead,
    ) -> core::result::Result<bool, ()> {
        let inbound = cx.shared;
        self.msg.template.segment = SegmentHeader {
            opcode: Opcode::ReadResponse,
            last: true,
            placement: Placement::Tagged {
                stag: request.sink_stag,
                to: request.sink_to,
            },
        };
        self.msg.template.rdmap = RdmapHeader::None;
        self.msg.sources.clear();
        if let Some((region, addr)) = request.source {
            let source = Source::Region {
                region,
                addr,
                len: request.size,
            };
            if self.msg.sources.push(source).is_err() {
                reads(inbound, |r| r.responded());
                return Err(());
            }
        }
        match self.plan(cx, Origin::Response, request.size) {
            Ok(()) => Ok(true),
            Err(_) => {
                self.msg.sources.clear();
                reads(inbound, |r| r.responded());
                Err(())
            }
        }
    }

    /// The current message failed locally: send work completes in error.
    fn fail_message(&mut self, qp: &Qp<RiwDevice>, status: u32) {
        if let Some(m) = self.msg.message.take() {
            self.msg.sources.clear();
            if let Origin::Work(work) | Origin::Read(work, _) = m.origin {
                complete_send(qp, &work, status);
            }
        }
    }

    /// The connection ended: the work taken from the send queue and not completed yet
    /// completes as flushed, oldest first.
    pub(crate) fn flush(&mut self, qp: &Qp<RiwDevice>, inbound: &impl Shared) {
        const FLUSHED: u32 = uapi::siw_wc_status_SIW_WC_WR_FLUSH_ERR;
        reads(inbound, |r| r.flush(qp));
        self.sched.pending = false;
        if let Some(work) = self.out.unreported.take() {
            // Its frame went whole only if a Terminate pushed it out.
            if self.out.sent == self.out.total() {
                if work.signalled {
                    complete_send(qp, &work, uapi::siw_wc_status_SIW_WC_SUCCESS);
                }
            } else {
                complete_send(
                    qp,
                    &SendWork {
                        signalled: true,
                        ..work
                    },
                    FLUSHED,
                );
            }
        }
        self.fail_message(qp, FLUSHED);
        if core::mem::take(&mut self.sched.held) {
            complete_send(qp, &SendWork::failed(&self.sched.sqe), FLUSHED);
        }
    }

    /// Checks the local buffer of send work `sqe` into `sources`: its SGEs, or inline
    /// data. Returns the total length, or the completion status to report.
    fn fill_sources(
        dev: &Device<RiwDevice>,
        qp: &Qp<RiwDevice>,
        sqe: &uapi::siw_sqe,
        rights: u32,
        sources: &mut Sources,
    ) -> core::result::Result<u64, u32> {
        const LOC_QP_OP_ERR: u32 = uapi::siw_wc_status_SIW_WC_LOC_QP_OP_ERR;
        sources.clear();
        if u32::from(sqe.flags) & uapi::siw_wqe_flags_SIW_WQE_INLINE != 0 {
            let len = sqe.sges()[0].length;
            if len as usize > INLINE_AREA {
                return Err(LOC_QP_OP_ERR);
            }
            sources
                .push(Source::Inline { len })
                .map_err(|_| LOC_QP_OP_ERR)?;
            return Ok(u64::from(len));
        }
        let n = usize::from(sqe.num_sge);
        if n > uapi::SIW_MAX_SGE as usize {
            return Err(LOC_QP_OP_ERR);
        }
        let pd = pd_id(qp.pd::<RiwDevice>());
        let sges = sqe.sges().iter().take(n).filter(|sge| sge.length != 0);
        // A message too short to go zero-copy is copied into each frame as it is built:
        // its regions are looked up then, and only borrowed for the copy. (A Read's sink
        // is written later, by the response: it keeps a reference.)
        let total: u64 = sges.clone().map(|sge| u64::from(sge.length)).sum();
        let min = u64::from(params::tx_zerocopy_min());
        if rights == 0 && (min == 0 || total < min) {
            for sge in sges {
                sources
                    .push(Source::Borrowed {
                        stag: sge.lkey,
                        pd,
                        addr: sge.laddr,
                        len: sge.length,
                    })
                    .map_err(|_| LOC_QP_OP_ERR)?;
            }
            return Ok(total);
        }
        for sge in sges {
            let region = RiwMr::lookup(dev, sge.lkey)
                .filter(|r| r.permits(sge.lkey, pd, rights, sge.laddr, u64::from(sge.length)))
                .ok_or(uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR)?;
            sources
                .push(Source::Region {
                    region,
                    addr: sge.laddr,
                    len: sge.length,
                })
                .map_err(|_| LOC_QP_OP_ERR)?;
        }
        Ok(total)
    }

    /// Validates the send work in `sqe` and plans its message: headers, sources and
    /// segments. `Err` is the completion status to report.
    fn start<H: Owner, S: Shared>(
        &mut self,
        cx: &TxContext<'_, H, S>,
    ) -> core::result::Result<(), u32> {
        let TxContext { dev, qp, .. } = *cx;
        const LOC_QP_OP_ERR: u32 = uapi::siw_wc_status_SIW_WC_LOC_QP_OP_ERR;
        let sqe = &self.sched.sqe;
        let flags = u32::from(sqe.flags);
        let known = uapi::siw_wqe_flags_SIW_WQE_VALID
            | uapi::siw_wqe_flags_SIW_WQE_INLINE
            | uapi::siw_wqe_flags_SIW_WQE_SIGNALLED
            | uapi::siw_wqe_flags_SIW_WQE_SOLICITED
            | uapi::siw_wqe_flags_SIW_WQE_READ_FENCE;
        if flags & !known != 0 {
            return Err(LOC_QP_OP_ERR);
        }
        let solicited = flags & uapi::siw_wqe_flags_SIW_WQE_SOLICITED != 0;
        let inline = flags & uapi::siw_wqe_flags_SIW_WQE_INLINE != 0;
        let opcode = match u32::from(sqe.opcode) {
            uapi::siw_opcode_SIW_OP_SEND if solicited => Opcode::SendSolicited,
            uapi::siw_opcode_SIW_OP_SEND => Opcode::Send,
            uapi::siw_opcode_SIW_OP_SEND_REMOTE_INV if solicited => Opcode::SendSolicitedInvalidate,
            uapi::siw_opcode_SIW_OP_SEND_REMOTE_INV => Opcode::SendInvalidate,
            uapi::siw_opcode_SIW_OP_WRITE => Opcode::RdmaWrite,
            uapi::siw_opcode_SIW_OP_READ if !inline && sqe.num_sge <= 1 => Opcode::ReadRequest,
            // Read with local invalidate: its sink, the one SGE, is invalidated once the
            // response is placed.
            uapi::siw_opcode_SIW_OP_READ_LOCAL_INV if !inline && sqe.num_sge == 1 => {
                Opcode::ReadRequest
            }
            _ => return Err(LOC_QP_OP_ERR),
        };
        // A Read's local buffer is written by the response.
        let rights = if opcode == Opcode::ReadRequest {
            access::LOCAL_WRITE
        } else {
            0
        };
        let total = Self::fill_sources(dev, qp, sqe, rights, &mut self.msg.sources)?;
        if total > u64::from(MAX_MSG_SIZE) {
            return Err(uapi::siw_wc_status_SIW_WC_LOC_LEN_ERR);
        }
        let work = SendWork::new(sqe, total as u32);
        let (rkey, raddr) = (sqe.rkey, sqe.raddr());
        if inline {
            self.msg.inline = sqe.inline_area();
        }
        let (origin, payload_len) = match opcode {
            Opcode::RdmaWrite => {
                self.msg.template.segment = SegmentHeader {
                    opcode,
                    last: true,
                    placement: Placement::Tagged {
                        stag: rkey,
                        to: raddr,
                    },
                };
                self.msg.template.rdmap = RdmapHeader::None;
                (Origin::Work(work), total)
            }
            Opcode::ReadRequest => {
                // A Read sends no payload: its one SGE, taken out of the sources, is the sink.
                let (region, sink_stag, sink_to) = match self.msg.sources.take_first() {
                    Some(Source::Region { region, addr, .. }) => {
                        (Some(region), self.sched.sqe.sges()[0].lkey, addr)
                    }
                    // Zero bytes: a non-zero STag all the same (hardware rejects 0).
                    _ => (None, ZERO_READ_SINK_STAG, 0),
                };
                sink_to
                    .checked_add(total)
                    .ok_or(uapi::siw_wc_status_SIW_WC_LOC_LEN_ERR)?;
                let msn = self.msg.read_msn;
                self.msg.read_msn = msn.wrapping_add(1);
                self.msg.template.segment = SegmentHeader {
                    opcode,
                    last: true,
                    placement: Placement::Untagged {
                        inval_stag: 0,
                        queue: QUEUE_READ_REQUEST,
                        msn,
                        mo: 0,
                    },
                };
                self.msg.template.rdmap = RdmapHeader::ReadRequest(ReadRequest {
                    sink_stag,
                    sink_to,
                    size: total as u32,
                    source_stag: rkey,
                    source_to: raddr,
                });
                let sink = ReadSink {
                    stag: sink_stag,
                    to: sink_to,
                    size: total as u32,
                    region,
                    received: 0,
                };
                (Origin::Read(work, sink), 0)
            }
            _ => {
                let inval_stag = if opcode.invalidates() { rkey } else { 0 };
                let msn = self.msg.send_msn;
                self.msg.send_msn = msn.wrapping_add(1);
                self.msg.template.segment = SegmentHeader {
                    opcode,
                    last: true,
                    placement: Placement::Untagged {
                        inval_stag,
                        queue: QUEUE_SEND,
                        msn,
                        mo: 0,
                    },
                };
                self.msg.template.rdmap = RdmapHeader::None;
                (Origin::Work(work), total)
            }
        };
        self.plan(cx, origin, payload_len as u32)
    }

    /// Plans the message for `origin` whose headers are the template and whose `len`
    /// payload bytes come from the sources. One that fits one FPDU and is copied (most
    /// small ones) is framed at once: no segmentation is planned, nothing waits to be
    /// built. `Err` is the completion status of its work.
    fn plan<H: Owner, S: Shared>(
        &mut self,
        cx: &TxContext<'_, H, S>,
        origin: Origin,
        len: u32,
    ) -> core::result::Result<(), u32> {
        let dev = cx.dev;
        const LOC_QP_OP_ERR: u32 = uapi::siw_wc_status_SIW_WC_LOC_QP_OP_ERR;
        let zero_copy = self.zero_copy(cx, u64::from(len));
        let spliced =
            zero_copy.is_none() && matches!(origin, Origin::Response) && self.splices(len);
        if spliced {
            dev.stats.inc(Stat::ZeroCopySends);
        }
        if zero_copy.is_none() && !spliced {
            if let Some(segment) = Segment::whole(&self.msg.template, len, self.msg.max_ulpdu) {
                // Framed behind earlier messages' FPDUs, if any wait (see `batching`).
                let before = if self.out.sent < self.out.total() {
                    self.out.len
                } else {
                    0
                };
                self.build(dev, &segment, false)
                    .map_err(|_| uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR)?;
                if self.framed(origin, None, cx).is_err() {
                    // Nothing of it goes; what was framed before it does.
                    self.out.set(before);
                    return Err(LOC_QP_OP_ERR);
                }
                return Ok(());
            }
        }
        let segments = Segmenter::new(&self.msg.template, len, self.msg.max_ulpdu)
            .map_err(|_| LOC_QP_OP_ERR)?;
        self.msg.message = Some(Message {
            origin,
            segments,
            zero_copy,
            spliced,
        });
        Ok(())
    }

    /// Builds the FPDU of `segment` of the current message into the frame buffer, its
    /// payload copied in (behind copied FPDUs not sent yet, see `batching`), or if the
    /// message goes `zero_copy` only its header and trailer.
    #[inline(always)]
    fn build(&mut self, dev: &Device<RiwDevice>, segment: &Segment, zero_copy: bool) -> Result {
        let base = if self.out.sent < self.out.total() {
            if zero_copy || self.out.zero_copy_len != 0 || self.out.sent != 0 {
                return Err(EINVAL);
            }
            self.out.len
        } else {
            0
        };
        let Building {
            template,
            sources,
            inline,
            crc,
            ..
        } = &mut self.msg;
        let frame = self.out.buf.get_mut(base..).ok_or(EINVAL)?;
        let (offset, len) = (segment.offset, segment.len as usize);
        let (mut writer, head) =
            FpduWriter::<KernelCrc32c>::begin_segment(template, segment, *crc, frame)
                .map_err(|_| EINVAL)?;
        let (body_end, zero_copy_len) = if zero_copy {
            writer
                .payload_elsewhere(len, |crc| payload_crc(sources, offset, len, crc).ok())
                .map_err(|_| EINVAL)?
                .ok_or(EFAULT)?;
            (head, len)
        } else {
            let body_end = head + len;
            let body = frame.get_mut(head..body_end).ok_or(EINVAL)?;
            gather(dev, sources, inline, offset, body)?;
            writer.payload(body).map_err(|_| EINVAL)?;
            (body_end, 0)
        };
        let tail = writer
            .finish(frame.get_mut(body_end..).ok_or(EINVAL)?)
            .map_err(|_| EINVAL)?;
        self.out.len = base + body_end + tail;
        // A frame wholly in the buffer goes in one socket call, not two around its payload.
        self.out.head = if zero_copy_len == 0 {
            self.out.len
        } else {
            body_end
        };
        self.out.zero_copy_len = zero_copy_len;
        self.out.payload_offset = offset;
        dev.stats.sent(&segment.segment, segment.len);
        self.out.sent = 0;
        self.out.more = !segment.segment.last;
        Ok(())
    }

    /// Sends a Terminate, best effort (the connection ends right after).
    pub(crate) fn terminate<H: SocketHandler>(&mut self, sock: &TcpStream<H>, term: Terminate) {
        // Whatever was half-sent must go first, or the Terminate would land inside it.
        if !matches!(self.push(sock, true), Ok(true)) {
            return;
        }
        let header = FpduHeader::terminate(term);
        if let Ok(n) = encode_fpdu::<KernelCrc32c>(&header, &[], self.msg.crc, &mut self.out.buf) {
            self.out.set(n);
            let _ = self.push(sock, false);
        }
    }

    /// Sends the peer-to-peer ready-to-receive message: a zero-length RDMA Write (with a
    /// non-zero STag, which some hardware insists on).
    pub(crate) fn ready_to_receive<H: SocketHandler>(&mut self, sock: &TcpStream<H>) -> Result {
        let header = FpduHeader::new(SegmentHeader {
            opcode: Opcode::RdmaWrite,
            last: true,
            placement: Placement::Tagged { stag: 1, to: 0 },
        });
        let n = encode_fpdu::<KernelCrc32c>(&header, &[], self.msg.crc, &mut self.out.buf)
            .map_err(|_| EINVAL)?;
        self.out.set(n);
        self.push(sock, false).map(|_| ())
    }
}

impl Source {
    fn len(&self) -> u32 {
        match self {
            Self::Region { len, .. } | Self::Borrowed { len, .. } | Self::Inline { len } => *len,
        }
    }

    /// Byte `at` of the source in a kernel consumer's memory, as its region and address.
    fn kernel_memory(&self, at: u32) -> Option<(&MemRegion, u64)> {
        match self {
            Self::Region { region, addr, .. } if region.is_kernel() => {
                Some((region, addr + u64::from(at)))
            }
            _ => None,
        }
    }

    /// Byte `at` of the source in pinned user memory, as that memory and its offset.
    fn user_memory(&self, at: u32) -> Option<(&UserMemory, usize)> {
        match self {
            Self::Region { region, addr, .. } => region.user_memory(addr + u64::from(at)),
            Self::Borrowed { .. } | Self::Inline { .. } => None,
        }
    }
}

/// Copies bytes `offset..offset + out.len()` of a message's payload, from `sources` (the
/// regions of `dev`) and its `inline` data, into `out`.
#[inline(always)]
fn gather(
    dev: &Device<RiwDevice>,
    sources: &Sources,
    inline: &[u8; INLINE_AREA],
    offset: u32,
    out: &mut [u8],
) -> Result {
    let mut done = 0;
    for piece in sources.pieces(offset, out.len()) {
        let (source, at, n) = piece?;
        let now = out.get_mut(done..done + n).ok_or(EINVAL)?;
        match source {
            Source::Region { region, addr, .. } => region.read(addr + u64::from(at), now)?,
            Source::Borrowed { stag, pd, addr, .. } => {
                let addr = addr + u64::from(at);
                RiwMr::with_region(dev, *stag, |region| {
                    region
                        .filter(|r| r.permits(*stag, *pd, 0, addr, n as u64))
                        .ok_or(EFAULT)?
                        .read(addr, now)
                })?
            }
            Source::Inline { .. } => {
                let start = at as usize;
                now.copy_from_slice(inline.get(start..start + n).ok_or(EINVAL)?);
            }
        }
        done += n;
    }
    Ok(())
}

/// Continues the CRC register `crc` over payload bytes `offset..offset + len` of a
/// zero-copy or spliced message from `sources`, read in place.
fn payload_crc(sources: &Sources, offset: u32, len: usize, mut crc: u32) -> Result<u32> {
    for piece in sources.pieces(offset, len) {
        let (source, at, n) = piece?;
        crc = match source.user_memory(at) {
            Some((mem, mem_offset)) => mem.crc32c(crc, mem_offset, n)?,
            None => {
                let (region, addr) = source.kernel_memory(at).ok_or(EINVAL)?;
                region.kernel_crc32c(crc, addr, n)?
            }
        };
    }
    Ok(crc)
}

/// Runs a send queue entry that acts on the local STag table (a registration, an
/// invalidation) and sends nothing; `None` for any other work. `Err` is the status of
/// its completion.
fn local_operation(
    dev: &Device<RiwDevice>,
    qp: &Qp<RiwDevice>,
    sqe: &uapi::siw_sqe,
) -> Option<core::result::Result<(), u32>> {
    const PROT_ERR: u32 = uapi::siw_wc_status_SIW_WC_LOC_PROT_ERR;
    let pd = pd_id(qp.pd::<RiwDevice>());
    match u32::from(sqe.opcode) {
        uapi::siw_opcode_SIW_OP_INVAL_STAG => Some(if RiwMr::invalidate(dev, sqe.rkey, pd) {
            Ok(())
        } else {
            Err(PROT_ERR)
        }),
        // Only a kernel consumer's QP has a fast-registration region in its domain.
        uapi::siw_opcode_SIW_OP_REG_MR => {
            Some(RiwMr::lookup(dev, sqe.rkey).ok_or(PROT_ERR).and_then(|r| {
                r.register(
                    sqe.rkey,
                    pd,
                    u32::try_from(sqe.access()).unwrap_or(u32::MAX),
                )
            }))
        }
        _ => None,
    }
}

/// What one look at the Read state found for the sender.
enum Look {
    /// A Read Request to answer now.
    Respond(InboundRead),
    /// Send work may go within `limits`; `requests`: Read Requests wait for responses.
    Work { limits: WorkLimits, requests: bool },
}

/// What the sender uses of the state its connection shares with the receiver.
pub(crate) trait Shared {
    /// Runs `f` on the connection's Read state, locked for that step only: the receiver
    /// shares it, and the sender never holds it across a socket call.
    fn with_reads<R>(&self, f: impl FnOnce(&mut Reads) -> R) -> R;
    /// The route copied the pages of a zero-copy send anyway.
    fn zero_copy_copied(&self) -> bool;
}

#[inline(always)]
fn reads<R>(inbound: &impl Shared, f: impl FnOnce(&mut Reads) -> R) -> R {
    inbound.with_reads(f)
}

/// Records a send work request the sender took from the queue (`riw_post`).
fn trace_taken(qp: &Qp<RiwDevice>, sqe: &uapi::siw_sqe) {
    if !trace::post_enabled() {
        return;
    }
    let sges = sqe.sges();
    let len = if u32::from(sqe.flags) & uapi::siw_wqe_flags_SIW_WQE_INLINE != 0 {
        sges[0].length
    } else {
        let n = usize::from(sqe.num_sge);
        sges.iter()
            .take(n)
            .fold(0u32, |l, s| l.wrapping_add(s.length))
    };
    trace::post(qp, qp.qp_num(), false, sqe.id, sqe.opcode, len);
}
