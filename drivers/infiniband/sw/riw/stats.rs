// SPDX-License-Identifier: GPL-2.0

//! The RNIC's port counters (`rdma statistic show link riwX/1`, sysfs
//! `ports/1/hw_counters/`): per-CPU, so that the data path counts without atomics or
//! shared cache lines.

use crate::kernel_ext::percpu::PerCpuCounters;
use crate::kernel_ext::rdma::CounterDesc;
use crate::proto::{Layer, Opcode, RxHeader, SegmentHeader, TermCause};
use kernel::c_str;
use kernel::prelude::*;

macro_rules! counters {
    ($($(#[$doc:meta])* $variant:ident = $name:literal;)*) => {
        /// A port counter. Names are what `rdma statistic` prints.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Stat {
            $($(#[$doc])* $variant,)*
        }

        /// How many counters there are.
        pub(crate) const COUNT: usize = [$($name),*].len();

        /// Their names, in `Stat` order.
        pub(crate) static PORT_COUNTERS: [CounterDesc; COUNT] =
            [$(CounterDesc::new(c_str!($name)),)*];
    };
}

counters! {
    /// FPDUs sent (Terminates and ready-to-receive messages included).
    TxFpdus = "tx_fpdus";
    /// FPDUs received, checked and parsed.
    RxFpdus = "rx_fpdus";
    /// Data bytes sent in Send, RDMA Write and Read Response FPDUs (headers, markers and
    /// CRCs not counted).
    TxPayloadBytes = "tx_payload_bytes";
    /// Data bytes received in Send, RDMA Write and Read Response FPDUs.
    RxPayloadBytes = "rx_payload_bytes";
    /// Send messages (any variant) sent, counted at their last FPDU.
    TxSends = "tx_sends";
    /// Send messages received.
    RxSends = "rx_sends";
    /// RDMA Write messages sent.
    TxWrites = "tx_writes";
    /// RDMA Write messages received.
    RxWrites = "rx_writes";
    /// RDMA Read Requests sent.
    TxReadRequests = "tx_read_requests";
    /// RDMA Read Requests received.
    RxReadRequests = "rx_read_requests";
    /// RDMA Read Response messages sent.
    TxReadResponses = "tx_read_responses";
    /// RDMA Read Response messages received.
    RxReadResponses = "rx_read_responses";
    /// Terminates sent, by the layer of their cause.
    TxTerminatesRdmap = "tx_terminates_rdmap";
    TxTerminatesDdp = "tx_terminates_ddp";
    TxTerminatesMpa = "tx_terminates_mpa";
    /// Terminates received, by the layer of their cause.
    RxTerminatesRdmap = "rx_terminates_rdmap";
    RxTerminatesDdp = "rx_terminates_ddp";
    RxTerminatesMpa = "rx_terminates_mpa";
    /// FPDUs whose CRC did not match.
    CrcErrors = "crc_errors";
    /// MPA frames, each way.
    MpaRequestsSent = "mpa_requests_sent";
    MpaRequestsReceived = "mpa_requests_received";
    MpaRepliesSent = "mpa_replies_sent";
    MpaRepliesReceived = "mpa_replies_received";
    MpaRejectsSent = "mpa_rejects_sent";
    MpaRejectsReceived = "mpa_rejects_received";
    /// Connections that reached RTS, either side.
    ConnectionsEstablished = "connections_established";
    /// Connections this end asked for that the peer refused (TCP reset or MPA reject).
    ConnectionsRefused = "connections_refused";
    /// Connections that timed out before they were up (TCP connect or MPA exchange).
    ConnectionsTimedOut = "connections_timed_out";
    /// Responder connections without peer-to-peer mode whose initiator sent nothing in
    /// the grace period: from then on this end sends without waiting (counted whether
    /// or not it had anything to send).
    ResponderSentFirst = "responder_sent_first";
    /// Messages sent from registered memory without a copy: from user memory, or Read
    /// Responses from a kernel consumer's memory.
    ZeroCopySends = "zero_copy_sends";
    /// Zero-copy messages from user memory whose pages the stack copied anyway.
    ZeroCopyFallbacks = "zero_copy_fallbacks";
    /// Peer accesses refused: invalid STag, rights, bounds, STag of another stream.
    AccessViolations = "access_violations";
    /// Untagged placement refused: no receive posted, bad MSN or offset, too long.
    PlacementErrors = "placement_errors";
    /// Completions lost because a CQ was full.
    CqOverruns = "cq_overruns";
    /// TCP segments retransmitted on riw's sockets.
    TcpRetransmits = "tcp_retransmits";
}

/// The counters of one RNIC.
pub(crate) struct DeviceStats(PerCpuCounters);

impl DeviceStats {
    pub(crate) fn new() -> Result<Self> {
        Ok(Self(PerCpuCounters::new(COUNT as u32)?))
    }

    /// Counts one `stat`.
    #[inline]
    pub(crate) fn inc(&self, stat: Stat) {
        self.0.add(stat as u32, 1);
    }

    /// Adds `n` to `stat`.
    #[inline]
    pub(crate) fn add(&self, stat: Stat, n: u64) {
        self.0.add(stat as u32, n);
    }

    /// Adds the totals to `values` (in `Stat` order).
    pub(crate) fn sum_into(&self, values: &mut [u64]) {
        self.0.sum_into(values);
    }

    /// An FPDU of `segment` went, with `payload` data bytes.
    #[inline]
    pub(crate) fn sent(&self, segment: &SegmentHeader, payload: u32) {
        self.inc(Stat::TxFpdus);
        let message = match segment.opcode {
            Opcode::Send
            | Opcode::SendSolicited
            | Opcode::SendInvalidate
            | Opcode::SendSolicitedInvalidate => Stat::TxSends,
            Opcode::RdmaWrite => Stat::TxWrites,
            Opcode::ReadResponse => Stat::TxReadResponses,
            Opcode::ReadRequest => return self.inc(Stat::TxReadRequests),
            _ => return,
        };
        self.add(Stat::TxPayloadBytes, payload.into());
        if segment.last {
            self.inc(message);
        }
    }

    /// An FPDU came in with header `h`.
    #[inline]
    pub(crate) fn received(&self, h: &RxHeader) {
        self.inc(Stat::RxFpdus);
        let message = match h.segment.opcode {
            Opcode::Send
            | Opcode::SendSolicited
            | Opcode::SendInvalidate
            | Opcode::SendSolicitedInvalidate => Stat::RxSends,
            Opcode::RdmaWrite => Stat::RxWrites,
            Opcode::ReadResponse => Stat::RxReadResponses,
            Opcode::ReadRequest => return self.inc(Stat::RxReadRequests),
            _ => return,
        };
        self.add(Stat::RxPayloadBytes, h.payload_len.into());
        if h.segment.last {
            self.inc(message);
        }
    }

    /// The peer-to-peer ready-to-receive message went: a zero-length RDMA Write.
    pub(crate) fn ready_to_receive_sent(&self) {
        self.inc(Stat::TxFpdus);
        self.inc(Stat::TxWrites);
    }

    /// A Terminate for `cause` went to the peer (`sent`) or came from it (whose FPDU
    /// `received` counted).
    pub(crate) fn terminate(&self, cause: TermCause, sent: bool) {
        if sent {
            self.inc(Stat::TxFpdus);
        }
        let stat = match (cause.layer(), sent) {
            (Some(Layer::Rdmap), true) => Stat::TxTerminatesRdmap,
            (Some(Layer::Ddp), true) => Stat::TxTerminatesDdp,
            (_, true) => Stat::TxTerminatesMpa,
            (Some(Layer::Rdmap), false) => Stat::RxTerminatesRdmap,
            (Some(Layer::Ddp), false) => Stat::RxTerminatesDdp,
            (_, false) => Stat::RxTerminatesMpa,
        };
        self.inc(stat);
    }

    /// The peer broke the protocol with `cause`: counts it as an access violation or a
    /// placement error, if it is either.
    pub(crate) fn violation(&self, cause: TermCause) {
        match (cause.layer(), cause.etype()) {
            (Some(Layer::Rdmap), 1) | (Some(Layer::Ddp), 1) => self.inc(Stat::AccessViolations),
            (Some(Layer::Ddp), 2) => self.inc(Stat::PlacementErrors),
            _ => {}
        }
        if cause == TermCause::MPA_CRC {
            self.inc(Stat::CrcErrors);
        }
    }
}
