// SPDX-License-Identifier: GPL-2.0

//! Work requests of kernel consumers (`struct ib_send_wr`, `struct ib_recv_wr`) as the
//! driver reads them, and work completions (`struct ib_wc`) as it reports them.

use crate::kernel_ext::bindings;
use core::marker::PhantomData;

/// A scatter/gather element (`struct ib_sge`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// What a send work request asks for.
#[derive(Clone, Copy, Debug)]
pub enum SendOp {
    Send,
    /// Send, invalidating the peer's STag.
    SendWithInv(u32),
    RdmaWrite {
        remote_addr: u64,
        rkey: u32,
    },
    RdmaRead {
        remote_addr: u64,
        rkey: u32,
    },
    /// RDMA Read that invalidates local STag `invalidate` (the sink's) once complete.
    RdmaReadWithInv {
        remote_addr: u64,
        rkey: u32,
        invalidate: u32,
    },
    /// Invalidates a local STag.
    LocalInv(u32),
    /// Fast registration of a region's mapped pages.
    Reg(RegWr),
    /// Anything else (atomics, immediate data, memory windows...).
    Unsupported,
}

/// A fast registration request (`struct ib_reg_wr`): the region, named by its current
/// lkey, gets STag `key` with rights `access` over the pages `ib_map_mr_sg` mapped, read
/// from the region when the request was posted.
#[derive(Clone, Copy, Debug)]
pub struct RegWr {
    pub mr_lkey: u32,
    pub key: u32,
    pub access: u32,
    pub iova: u64,
    pub length: u64,
    pub page_size: u64,
}

/// A kernel consumer's send work request.
#[derive(Clone, Copy, Debug)]
pub struct SendWr {
    pub wr_id: u64,
    pub op: SendOp,
    pub signaled: bool,
    pub solicited: bool,
    pub inline: bool,
    pub fence: bool,
}

/// A chain of kernel work requests, read one at a time.
///
/// Requests and their scatter/gather lists are read with unaligned loads: consumers embed
/// them in packed descriptors (iSER's, for one), where C reads them unaligned too.
///
/// # Invariants
///
/// `next` is NULL or a valid (possibly unaligned) work request of the chain the consumer
/// posted, unchanged for `'a`.
pub struct WrChain<'a, W> {
    next: *const W,
    _chain: PhantomData<&'a W>,
}

impl<W> WrChain<'_, W> {
    /// # Safety
    ///
    /// `first` is NULL or the head of a valid chain, unchanged for the returned lifetime.
    pub(crate) unsafe fn new(first: *const W) -> Self {
        Self {
            next: first,
            _chain: PhantomData,
        }
    }

    /// The request the chain is at: the first that failed, if posting stopped.
    pub(crate) fn current(&self) -> *const W {
        self.next
    }
}

/// A chain of send work requests.
pub type SendChain<'a> = WrChain<'a, bindings::ib_send_wr>;
/// A chain of receive work requests.
pub type RecvChain<'a> = WrChain<'a, bindings::ib_recv_wr>;

/// Reads the scatter/gather list of a request into `out`; `None` if it has more entries.
///
/// # Safety
///
/// `sg_list` is valid for `num_sge` entries, aligned or not.
unsafe fn read_sges(
    sg_list: *const bindings::ib_sge,
    num_sge: i32,
    out: &mut [Sge],
) -> Option<usize> {
    let n = usize::try_from(num_sge).ok().filter(|&n| n <= out.len())?;
    for (i, slot) in out.iter_mut().take(n).enumerate() {
        // SAFETY: `i < num_sge`; read unaligned, as the list may sit in a packed structure.
        let sge = unsafe { sg_list.add(i).read_unaligned() };
        *slot = Sge {
            addr: sge.addr,
            length: sge.length,
            lkey: sge.lkey,
        };
    }
    Some(n)
}

impl WrChain<'_, bindings::ib_send_wr> {
    /// The next send request and the number of its SGEs, read into `sges`; `Err(())` if it
    /// has more than `sges` holds; `None` at the end of the chain.
    pub fn next_send(&self, sges: &mut [Sge]) -> Option<Result<(SendWr, usize), ()>> {
        if self.next.is_null() {
            return None;
        }
        // SAFETY: By the invariant, `next` is a valid request, possibly unaligned.
        let wr = unsafe { self.next.read_unaligned() };
        // SAFETY: The consumer's list has `num_sge` entries.
        let Some(n) = (unsafe { read_sges(wr.sg_list, wr.num_sge, sges) }) else {
            return Some(Err(()));
        };
        let flags = wr.send_flags as u32;
        // SAFETY (each cast below): for the opcode matched, the request is the `wr` field,
        // at offset 0, of the larger request structure the verbs define for it.
        let op = match wr.opcode {
            bindings::ib_wr_opcode_IB_WR_SEND => SendOp::Send,
            // SAFETY: The union member the opcode selects.
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV => {
                SendOp::SendWithInv(unsafe { wr.ex.invalidate_rkey })
            }
            // SAFETY: As above.
            bindings::ib_wr_opcode_IB_WR_LOCAL_INV => {
                SendOp::LocalInv(unsafe { wr.ex.invalidate_rkey })
            }
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
            | bindings::ib_wr_opcode_IB_WR_RDMA_READ
            | bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV => {
                // SAFETY: An RDMA opcode: a `struct ib_rdma_wr`, possibly unaligned.
                let rdma = unsafe { self.next.cast::<bindings::ib_rdma_wr>().read_unaligned() };
                let (remote_addr, rkey) = (rdma.remote_addr, rdma.rkey);
                match wr.opcode {
                    bindings::ib_wr_opcode_IB_WR_RDMA_WRITE => {
                        SendOp::RdmaWrite { remote_addr, rkey }
                    }
                    bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                        SendOp::RdmaRead { remote_addr, rkey }
                    }
                    _ => SendOp::RdmaReadWithInv {
                        remote_addr,
                        rkey,
                        // SAFETY: The union member the opcode selects.
                        invalidate: unsafe { wr.ex.invalidate_rkey },
                    },
                }
            }
            bindings::ib_wr_opcode_IB_WR_REG_MR => {
                // SAFETY: A registration: a `struct ib_reg_wr`, possibly unaligned.
                let reg = unsafe { self.next.cast::<bindings::ib_reg_wr>().read_unaligned() };
                // SAFETY: A registration names a live MR of this device (NULL is checked),
                // which its consumer mapped and does not change until the request completes.
                match unsafe { reg.mr.as_ref() } {
                    Some(mr) => SendOp::Reg(RegWr {
                        mr_lkey: mr.lkey,
                        key: reg.key,
                        access: reg.access as u32,
                        iova: mr.iova,
                        length: mr.length,
                        page_size: u64::from(mr.page_size),
                    }),
                    None => SendOp::Unsupported,
                }
            }
            _ => SendOp::Unsupported,
        };
        let send = SendWr {
            // SAFETY: Both union members are 64 bits; a consumer using `wr_cqe` gets its
            // pointer back unchanged in the completion.
            wr_id: unsafe { wr.__bindgen_anon_1.wr_id },
            op,
            signaled: flags & bindings::ib_send_flags_IB_SEND_SIGNALED as u32 != 0,
            solicited: flags & bindings::ib_send_flags_IB_SEND_SOLICITED as u32 != 0,
            inline: flags & bindings::ib_send_flags_IB_SEND_INLINE as u32 != 0,
            fence: flags & bindings::ib_send_flags_IB_SEND_FENCE as u32 != 0,
        };
        Some(Ok((send, n)))
    }
}

impl WrChain<'_, bindings::ib_recv_wr> {
    /// The next receive request's id and number of SGEs, like [`Self::next_send`].
    pub fn next_recv(&self, sges: &mut [Sge]) -> Option<Result<(u64, usize), ()>> {
        if self.next.is_null() {
            return None;
        }
        // SAFETY: By the invariant, `next` is a valid request, possibly unaligned.
        let wr = unsafe { self.next.read_unaligned() };
        // SAFETY: The consumer's list has `num_sge` entries.
        let n = unsafe { read_sges(wr.sg_list, wr.num_sge, sges) };
        // SAFETY: As in `next_send`.
        Some(
            n.map(|n| (unsafe { wr.__bindgen_anon_1.wr_id }, n))
                .ok_or(()),
        )
    }
}

/// Work request chains move on the same way.
pub trait ChainLink {
    /// # Safety
    ///
    /// `this` is a valid request, aligned or not.
    unsafe fn next_of(this: *const Self) -> *const Self;
}

impl ChainLink for bindings::ib_send_wr {
    unsafe fn next_of(this: *const Self) -> *const Self {
        // SAFETY: The caller guarantees `this` is valid; it may be unaligned.
        unsafe { core::ptr::addr_of!((*this).next).read_unaligned() }
    }
}

impl ChainLink for bindings::ib_recv_wr {
    unsafe fn next_of(this: *const Self) -> *const Self {
        // SAFETY: The caller guarantees `this` is valid; it may be unaligned.
        unsafe { core::ptr::addr_of!((*this).next).read_unaligned() }
    }
}

impl<W: ChainLink> WrChain<'_, W> {
    /// Moves past the current request.
    pub fn advance(&mut self) {
        if !self.next.is_null() {
            // SAFETY: By the invariant, `next` is a valid request of the chain.
            self.next = unsafe { W::next_of(self.next) };
        }
    }
}

/// A work completion status (`enum ib_wc_status`), those riw reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcStatus {
    Success,
    LocLenErr,
    LocQpOpErr,
    LocProtErr,
    WrFlushErr,
    BadRespErr,
    LocAccessErr,
    RemAccessErr,
    RemInvReqErr,
    GeneralErr,
}

/// A work completion opcode (`enum ib_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOpcode {
    Send,
    RdmaWrite,
    RdmaRead,
    LocalInv,
    RegMr,
    Recv,
}

/// A completion for a kernel consumer.
#[derive(Clone, Copy, Debug)]
pub struct WorkCompletion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    pub byte_len: u32,
    /// The QP's number; the abstraction finds the QP.
    pub qp_num: u32,
    /// The STag a received Send with Invalidate invalidated.
    pub invalidated_rkey: Option<u32>,
}

impl WorkCompletion {
    /// A placeholder for buffers the driver fills.
    pub const EMPTY: Self = Self {
        wr_id: 0,
        status: WcStatus::GeneralErr,
        opcode: WcOpcode::Send,
        byte_len: 0,
        qp_num: 0,
        invalidated_rkey: None,
    };

    pub(crate) fn write(&self, wc: &mut bindings::ib_wc, qp: *mut bindings::ib_qp) {
        wc.__bindgen_anon_1.wr_id = self.wr_id;
        wc.status = match self.status {
            WcStatus::Success => bindings::ib_wc_status_IB_WC_SUCCESS,
            WcStatus::LocLenErr => bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
            WcStatus::LocQpOpErr => bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
            WcStatus::LocProtErr => bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
            WcStatus::WrFlushErr => bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
            WcStatus::BadRespErr => bindings::ib_wc_status_IB_WC_BAD_RESP_ERR,
            WcStatus::LocAccessErr => bindings::ib_wc_status_IB_WC_LOC_ACCESS_ERR,
            WcStatus::RemAccessErr => bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
            WcStatus::RemInvReqErr => bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
            WcStatus::GeneralErr => bindings::ib_wc_status_IB_WC_GENERAL_ERR,
        };
        wc.opcode = match self.opcode {
            WcOpcode::Send => bindings::ib_wc_opcode_IB_WC_SEND,
            WcOpcode::RdmaWrite => bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
            WcOpcode::RdmaRead => bindings::ib_wc_opcode_IB_WC_RDMA_READ,
            WcOpcode::LocalInv => bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
            WcOpcode::RegMr => bindings::ib_wc_opcode_IB_WC_REG_MR,
            WcOpcode::Recv => bindings::ib_wc_opcode_IB_WC_RECV,
        };
        wc.vendor_err = 0;
        wc.byte_len = self.byte_len;
        wc.qp = qp;
        wc.wc_flags = 0;
        if let Some(rkey) = self.invalidated_rkey {
            wc.ex.invalidate_rkey = rkey;
            wc.wc_flags = bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE as _;
        }
        wc.src_qp = 0;
        wc.port_num = 1;
    }
}
