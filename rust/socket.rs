// SPDX-License-Identifier: GPL-2.0

//! Kernel TCP sockets for an RNIC engine: non-blocking connect, listen, accept, send and
//! receive, and the socket callbacks (`sk_data_ready`, `sk_state_change`,
//! `sk_write_space`) turned into calls on a reference-counted handler.
//!
//! The callbacks run in softirq context or from a socket's backlog processing, and read
//! the handler under RCU; a handler only notes the event and schedules its work there. A handler is bound
//! to a socket with [`TcpStream::attach`] or when a [`TcpListener`] is created; the
//! socket keeps one reference to it, which [`TcpStream::detach`] (or dropping the socket)
//! takes back after clearing it under the callback lock and waiting for an RCU grace
//! period, after which no callback can reach the handler any more.

use super::bindings;
use super::errno::EAFNOSUPPORT;
use super::net::NetDevice;
use super::rdma::{KernelPieces, UserMemory};
use core::ffi::{c_int, c_uint, c_void};
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::alloc::{flags::GFP_KERNEL, KBox};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::Arc;

/// An IPv4 or IPv6 socket address.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SocketAddr {
    V4 {
        addr: [u8; 4],
        port: u16,
    },
    V6 {
        addr: [u8; 16],
        port: u16,
        scope_id: u32,
    },
}

impl SocketAddr {
    /// Reads a `struct sockaddr_storage` (AF_INET or AF_INET6).
    pub fn from_storage(ss: &bindings::__kernel_sockaddr_storage) -> Result<Self> {
        let p: *const bindings::__kernel_sockaddr_storage = ss;
        // SAFETY: Every `sockaddr` type starts with the 16-bit family.
        let family = u32::from(unsafe { *p.cast::<u16>() });
        match family {
            bindings::AF_INET => {
                // SAFETY: A `sockaddr_storage` is large and aligned enough for every
                // address type; the family says it holds a `sockaddr_in`.
                let sin = unsafe { &*p.cast::<bindings::sockaddr_in>() };
                Ok(Self::V4 {
                    addr: sin.sin_addr.s_addr.to_ne_bytes(),
                    port: u16::from_be(sin.sin_port),
                })
            }
            bindings::AF_INET6 => {
                // SAFETY: As above, for a `sockaddr_in6`.
                let sin6 = unsafe { &*p.cast::<bindings::sockaddr_in6>() };
                Ok(Self::V6 {
                    // SAFETY: Every view of the address union is 16 plain bytes.
                    addr: unsafe { sin6.sin6_addr.in6_u.u6_addr8 },
                    port: u16::from_be(sin6.sin6_port),
                    scope_id: sin6.sin6_scope_id,
                })
            }
            _ => Err(EAFNOSUPPORT()),
        }
    }

    /// The address as a `struct sockaddr_storage`.
    pub fn to_storage(&self) -> bindings::__kernel_sockaddr_storage {
        let mut ss = bindings::__kernel_sockaddr_storage::default();
        let p: *mut bindings::__kernel_sockaddr_storage = &mut ss;
        match *self {
            Self::V4 { addr, port } => {
                let sin = bindings::sockaddr_in {
                    sin_family: bindings::AF_INET as _,
                    sin_port: port.to_be(),
                    sin_addr: bindings::in_addr {
                        s_addr: u32::from_ne_bytes(addr),
                    },
                    ..Default::default()
                };
                // SAFETY: The storage is large and aligned enough for a `sockaddr_in`.
                unsafe { p.cast::<bindings::sockaddr_in>().write(sin) };
            }
            Self::V6 {
                addr,
                port,
                scope_id,
            } => {
                let mut sin6 = bindings::sockaddr_in6 {
                    sin6_family: bindings::AF_INET6 as _,
                    sin6_port: port.to_be(),
                    sin6_scope_id: scope_id,
                    ..Default::default()
                };
                sin6.sin6_addr.in6_u.u6_addr8 = addr;
                // SAFETY: The storage is large and aligned enough for a `sockaddr_in6`.
                unsafe { p.cast::<bindings::sockaddr_in6>().write(sin6) };
            }
        }
        ss
    }

    /// The length of the address's `struct sockaddr_in` or `sockaddr_in6`, which
    /// `to_storage` writes.
    fn storage_len(&self) -> c_int {
        let len = match self {
            Self::V4 { .. } => core::mem::size_of::<bindings::sockaddr_in>(),
            Self::V6 { .. } => core::mem::size_of::<bindings::sockaddr_in6>(),
        };
        len as c_int
    }

    /// The address family (`AF_INET` or `AF_INET6`).
    pub fn family(&self) -> i32 {
        match self {
            Self::V4 { .. } => bindings::AF_INET as i32,
            Self::V6 { .. } => bindings::AF_INET6 as i32,
        }
    }

    /// The same address with another port.
    pub fn with_port(mut self, new: u16) -> Self {
        match &mut self {
            Self::V4 { port, .. } | Self::V6 { port, .. } => *port = new,
        }
        self
    }

    /// Whether the address is the wildcard (0.0.0.0 or ::).
    pub fn is_wildcard(&self) -> bool {
        match self {
            Self::V4 { addr, .. } => *addr == [0; 4],
            Self::V6 { addr, .. } => *addr == [0; 16],
        }
    }
}

impl fmt::Display for SocketAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4 { addr, port } => {
                write!(
                    f,
                    "{}.{}.{}.{}:{}",
                    addr[0], addr[1], addr[2], addr[3], port
                )
            }
            Self::V6 { addr, port, .. } => {
                f.write_str("[")?;
                for (i, pair) in addr.chunks(2).enumerate() {
                    if i > 0 {
                        f.write_str(":")?;
                    }
                    write!(f, "{:x}", u16::from_be_bytes([pair[0], pair[1]]))?;
                }
                write!(f, "]:{}", port)
            }
        }
    }
}

/// A TCP state (`sk_state`), as far as an engine cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpState {
    /// The connection is up.
    Established,
    /// Connecting (SYN sent or received).
    Connecting,
    /// The peer closed its direction (FIN received).
    CloseWait,
    /// We or both sides are closing.
    Closing,
    /// Closed, or reset.
    Closed,
    /// A listening socket.
    Listen,
}

// `enum` of include/net/tcp_states.h: part of the kernel ABI (sock_diag reports them).
const TCP_ESTABLISHED: i32 = 1;
const TCP_SYN_SENT: i32 = 2;
const TCP_SYN_RECV: i32 = 3;
const TCP_FIN_WAIT1: i32 = 4;
const TCP_FIN_WAIT2: i32 = 5;
const TCP_TIME_WAIT: i32 = 6;
const TCP_CLOSE: i32 = 7;
const TCP_CLOSE_WAIT: i32 = 8;
const TCP_LAST_ACK: i32 = 9;
const TCP_LISTEN: i32 = 10;
const TCP_CLOSING: i32 = 11;
const TCP_NEW_SYN_RECV: i32 = 12;

// Flags of `struct msghdr`.
const MSG_DONTWAIT: c_uint = kernel::bindings::MSG_DONTWAIT;
const MSG_NOSIGNAL: c_uint = kernel::bindings::MSG_NOSIGNAL;
const MSG_MORE: c_uint = kernel::bindings::MSG_MORE;
const MSG_EOR: c_uint = kernel::bindings::MSG_EOR;
const MSG_ZEROCOPY: c_uint = kernel::bindings::MSG_ZEROCOPY;
const MSG_SPLICE_PAGES: c_uint = kernel::bindings::MSG_SPLICE_PAGES;

// `sk_shutdown` bit of include/net/sock.h: the peer sent its FIN.
const RCV_SHUTDOWN: u8 = 1;

// The flags of a zero-copy `ubuf_info`, as include/linux/skbuff.h composes
// `SKBFL_ZEROCOPY_FRAG` (which bindgen cannot evaluate) and adds `SKBFL_DONT_ORPHAN`.
const ZC_FLAGS: u8 = (kernel::bindings::SKBFL_ZEROCOPY_ENABLE
    | kernel::bindings::SKBFL_SHARED_FRAG
    | kernel::bindings::SKBFL_DONT_ORPHAN) as u8;

/// `READ_ONCE(*p)`: one read the compiler neither tears, repeats nor drops, of a field
/// that others may change meanwhile.
///
/// # Safety
///
/// `p` is valid for a read of a `T`, and aligned.
#[inline(always)]
unsafe fn read_once<T: Copy>(p: *const T) -> T {
    // SAFETY: The caller guarantees `p` is valid and aligned; a volatile read is what
    // READ_ONCE() does for a field of machine-word size or less.
    unsafe { p.read_volatile() }
}

/// The name of a TCP state (`sk_state`), as `ss` prints it.
fn tcp_state_name(raw: i32) -> &'static str {
    match raw {
        TCP_ESTABLISHED => "ESTAB",
        TCP_SYN_SENT => "SYN-SENT",
        TCP_SYN_RECV | TCP_NEW_SYN_RECV => "SYN-RECV",
        TCP_FIN_WAIT1 => "FIN-WAIT-1",
        TCP_FIN_WAIT2 => "FIN-WAIT-2",
        TCP_TIME_WAIT => "TIME-WAIT",
        TCP_CLOSE => "UNCONN",
        TCP_CLOSE_WAIT => "CLOSE-WAIT",
        TCP_LAST_ACK => "LAST-ACK",
        TCP_LISTEN => "LISTEN",
        TCP_CLOSING => "CLOSING",
        _ => "UNKNOWN",
    }
}

impl TcpState {
    fn from_raw(raw: i32) -> Self {
        match raw {
            TCP_ESTABLISHED => Self::Established,
            TCP_SYN_SENT | TCP_SYN_RECV | TCP_NEW_SYN_RECV => Self::Connecting,
            TCP_CLOSE_WAIT => Self::CloseWait,
            TCP_CLOSE => Self::Closed,
            TCP_LISTEN => Self::Listen,
            _ => Self::Closing,
        }
    }
}

/// What a socket callback reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketEvent {
    /// Data (or, on a listener, a connection) arrived.
    DataReady,
    /// The TCP state changed.
    StateChange,
    /// After a send was refused for room, a third of the send buffer is free again.
    WriteSpace,
}

/// A handler of socket callbacks. Called in softirq context or from a socket's backlog
/// processing, in an RCU read section: it must not sleep.
pub trait SocketHandler: Send + Sync + 'static {
    fn socket_event(this: &Arc<Self>, event: SocketEvent);

    /// Data arrived on a connected socket. `sock` is the socket, locked, if this context
    /// may read it: in softirq under the socket's spinlock, or in the task that owns the
    /// socket as it processes the socket's backlog (`release_sock`; that task may be
    /// anywhere in the handler's own code that sends or locks the socket, so this must
    /// not wait for anything held there); with it, the bytes received and not read yet.
    /// By default, the event goes to `socket_event`.
    fn data_ready(this: &Arc<Self>, sock: Option<(&LockedSocket<'_>, usize)>) {
        let _ = sock;
        Self::socket_event(this, SocketEvent::DataReady);
    }
}

/// A TCP socket whose lock the holder has: inside `TcpStream::with_lock`, or in a
/// data-ready callback (in softirq under the socket's spinlock, or in the owning task's
/// backlog processing). Reading it here is what `tcp_read_sock` asks for.
///
/// # Invariants
///
/// `sk` is a live TCP socket, locked (as above) for `'a`.
pub struct LockedSocket<'a> {
    sk: *mut bindings::sock,
    _locked: PhantomData<&'a ()>,
}

impl LockedSocket<'_> {
    /// Reads what is there in place, without blocking: hands each contiguous run of
    /// received bytes, straight from the socket's buffers, to `reader`, which returns how
    /// many it used; using fewer stops the read there, the rest staying for the next one.
    /// Returns the bytes used (0 at end of stream, unless `reader` stopped at once;
    /// EAGAIN if nothing is there yet), and whether a read now would only find nothing
    /// there yet (no bytes, no end of stream, no error), which saves that read. `reader`
    /// runs under the socket's lock, and in softirq context from a callback: it must not
    /// sleep, nor use the socket.
    pub fn read_in_place<F: FnMut(&[u8]) -> usize>(&self, reader: &mut F) -> (Result<usize>, bool) {
        let mut desc = bindings::read_descriptor_t {
            count: 1,
            arg: bindings::read_descriptor_t__bindgen_ty_1 {
                data: ptr::from_mut(reader).cast(),
            },
            ..Default::default()
        };
        // `desc` carries `reader`, alive and not otherwise used during the call, which is
        // the only time `read_actor::<F>` runs with it.
        let mut ret =
            // SAFETY: A live TCP socket, locked as `tcp_read_sock` asks (type invariant).
            unsafe { bindings::riw_tcp_read_sock(self.sk, &mut desc, Some(read_actor::<F>)) };
        // Nothing taken and the reader did not stop it: empty, at its end, or failed.
        if ret == 0 && desc.count != 0 {
            // SAFETY: A live socket, whose lock this holder has.
            ret = unsafe { bindings::riw_sock_error(self.sk) };
            // SAFETY: A live socket; under its lock, the receive queue stays as it is.
            if ret == 0 && !unsafe { self.at_end() } {
                ret = EAGAIN.to_errno();
            }
        }
        // SAFETY: A live TCP socket.
        let drained = unsafe { nothing_to_read(self.sk) };
        if ret < 0 {
            return (Err(Error::from_errno(ret)), drained);
        }
        (Ok(ret as usize), drained)
    }

    /// Whether the peer ended its stream and every byte before the end was read.
    ///
    /// # Safety
    ///
    /// Called with nothing read and the lock still held, so that the receive queue does
    /// not change.
    unsafe fn at_end(&self) -> bool {
        // SAFETY: A live socket (type invariant); the caller holds its lock.
        unsafe {
            read_once(&raw const (*self.sk).sk_shutdown) & RCV_SHUTDOWN != 0
                && bindings::riw_skb_queue_empty(&raw const (*self.sk).sk_receive_queue)
        }
    }
}

/// Whether `sk` has nothing to read and nothing else to find by reading: no bytes, no end
/// of stream, no error. The fields are read as `tcp_poll()` reads them, so the socket's
/// lock is not needed; a caller that holds it gets an answer nothing can change meanwhile.
///
/// # Safety
///
/// `sk` is a live TCP socket.
unsafe fn nothing_to_read(sk: *mut bindings::sock) -> bool {
    // SAFETY: A live TCP socket (the caller's guarantee) is the `sock` of a `tcp_sock`.
    let tp = unsafe { bindings::riw_tcp_sk(sk) };
    // SAFETY: `tp` and `sk` are live and their fields aligned; TCP changes these fields
    // under the socket's lock, so each is read once, as READ_ONCE() does.
    unsafe {
        read_once(&raw const (*tp).rcv_nxt) == read_once(&raw const (*tp).copied_seq)
            && read_once(&raw const (*sk).sk_shutdown) & RCV_SHUTDOWN == 0
            && read_once(&raw const (*sk).sk_err) == 0
    }
}

/// `tcp_read_sock()`'s actor for a reader of type `F`: the bytes of `skb` from `offset` to
/// the reader, until it stops; a reader that stopped takes nothing more of this read.
///
/// # Safety
///
/// Called by `tcp_read_sock()` on the locked socket, with `read_in_place`'s `desc`, whose
/// `arg.data` is its live reader of type `F`, and with a live `skb` of which `len` bytes
/// from `offset` are there to read.
unsafe extern "C" fn read_actor<F: FnMut(&[u8]) -> usize>(
    desc: *mut bindings::read_descriptor_t,
    skb: *mut bindings::sk_buff,
    offset: c_uint,
    len: usize,
) -> c_int {
    // SAFETY: `desc` is `read_in_place`'s descriptor, alive during the read.
    if unsafe { (*desc).count } == 0 {
        return 0;
    }
    // SAFETY: `arg.data` is `read_in_place`'s reader of type `F`, which nothing else uses
    // while `tcp_read_sock()` runs.
    let reader = unsafe { &mut *(*desc).arg.data.cast::<F>() };
    let mut walk = SkbWalk {
        reader,
        stopped: false,
    };
    // SAFETY: A live skb of the socket, with `len` bytes from `offset`.
    let taken = unsafe { walk.skb(skb, offset as usize, len) };
    if walk.stopped {
        // SAFETY: As above.
        unsafe { (*desc).count = 0 };
    }
    // At most `len`, which TCP passes as an int's worth.
    taken as c_int
}

/// Hands the bytes of skbs to a reader of type `F`, one contiguous run at a time: the
/// linear part, each page of each fragment, then the skbs of the fragment list, each page
/// mapped with `kmap_local_page()` for its run. A reader that takes fewer bytes than a run
/// holds stops the walk.
struct SkbWalk<'a, F> {
    reader: &'a mut F,
    stopped: bool,
}

impl<F: FnMut(&[u8]) -> usize> SkbWalk<'_, F> {
    /// Gives the reader one run; returns the bytes it took.
    ///
    /// # Safety
    ///
    /// `data` is valid for reads of `len` bytes, and not written, until this returns.
    #[inline(always)]
    unsafe fn run(&mut self, data: *const u8, len: usize) -> usize {
        // SAFETY: The caller's guarantee; `data` is never NULL (an skb's data, or a mapped
        // page); the reader borrows the slice for its own call only.
        let chunk = unsafe { core::slice::from_raw_parts(data, len) };
        let used = (self.reader)(chunk).min(len);
        if used < len {
            self.stopped = true;
        }
        used
    }

    /// Hands the reader `len` bytes of `skb` from `offset`; returns the bytes taken.
    /// Inlined into the read actor, which saves a call on every read; the skbs of a
    /// fragment list, rare, recurse through `frag_list`.
    ///
    /// # Safety
    ///
    /// `skb` is live, and not changed while this runs (TCP holds it under the socket's
    /// lock), and holds `len` bytes from `offset`.
    #[inline(always)]
    unsafe fn skb(
        &mut self,
        skb: *const bindings::sk_buff,
        mut offset: usize,
        mut len: usize,
    ) -> usize {
        // SAFETY: A live skb (the caller's guarantee).
        let (skb_len, data_len, data) = unsafe { ((*skb).len, (*skb).data_len, (*skb).data) };
        // skb_headlen(): the bytes of the linear part.
        let mut pos = (skb_len - data_len) as usize;
        let mut taken = 0;
        if offset < pos {
            // SAFETY: The linear part holds `pos` bytes at `data`.
            let used = unsafe { self.run(data.add(offset), (pos - offset).min(len)) };
            taken += used;
            offset += used;
            len -= used;
        }
        // SAFETY: A live skb has its shared info.
        let shinfo = unsafe { bindings::riw_skb_shinfo(skb) };
        // SAFETY: As above; `nr_frags` does not change while TCP holds the skb.
        let nr_frags = usize::from(unsafe { (*shinfo).nr_frags });
        let mut i = 0;
        while i < nr_frags && len != 0 && !self.stopped {
            // SAFETY: One of the skb's `nr_frags` fragments, in its array.
            let frag = unsafe { &raw const (*shinfo).frags[i] };
            // SAFETY: As above: skb_frag_size() and skb_frag_off().
            let (size, frag_off) = unsafe { ((*frag).len as usize, (*frag).offset as usize) };
            if offset < pos + size {
                // SAFETY: A fragment of a live skb.
                let page = unsafe { bindings::riw_skb_frag_page(frag) };
                if page.is_null() {
                    // Its memory is a device's (devmem TCP), not the host's: nothing a
                    // reader can read. riw's sockets never receive such fragments.
                    self.stopped = true;
                    break;
                }
                while offset < pos + size && len != 0 && !self.stopped {
                    // A fragment may span the pages of a compound page.
                    let in_frag = frag_off + (offset - pos);
                    let in_page = in_frag % PAGE_SIZE;
                    let n = (pos + size - offset).min(len).min(PAGE_SIZE - in_page);
                    // The fragment's bytes lie in the pages of its (compound) page, from
                    // `page`; it stays mapped until the unmap below.
                    let va =
                        // SAFETY: Page `in_frag / PAGE_SIZE` of `page` is one of them.
                        unsafe { bindings::riw_kmap_local_page(page.add(in_frag / PAGE_SIZE)) };
                    // SAFETY: `n` bytes at `in_page` are in the mapped page (`n` is at most
                    // the rest of the page) and in the fragment.
                    let used = unsafe { self.run(va.cast::<u8>().add(in_page), n) };
                    // SAFETY: Mapped above on this CPU; what the reader mapped meanwhile,
                    // it unmapped.
                    unsafe { bindings::riw_kunmap_local(va) };
                    taken += used;
                    offset += used;
                    len -= used;
                }
            }
            pos += size;
            i += 1;
        }
        // SAFETY: As above: skb_has_frag_list().
        if len != 0 && !self.stopped && !unsafe { (*shinfo).frag_list }.is_null() {
            // SAFETY: The skb's fragment list begins at `pos`; the caller's guarantees
            // hold for the rest of the skb.
            taken += unsafe { self.frag_list(shinfo, offset, len, pos) };
        }
        taken
    }

    /// The rest of `skb`: the skbs of the fragment list of `shinfo`, which begins at `pos`.
    ///
    /// # Safety
    ///
    /// As for `skb`, of the skb whose shared info is `shinfo`.
    #[inline(never)]
    unsafe fn frag_list(
        &mut self,
        shinfo: *const bindings::skb_shared_info,
        mut offset: usize,
        mut len: usize,
        mut pos: usize,
    ) -> usize {
        let mut taken = 0;
        // SAFETY: The shared info of a live skb (skb_walk_frags()).
        let mut iter = unsafe { (*shinfo).frag_list }.cast_const();
        while !iter.is_null() && len != 0 && !self.stopped {
            // SAFETY: A live skb of the list, which the skb holding it keeps.
            let iter_len = unsafe { (*iter).len } as usize;
            if offset < pos + iter_len {
                // SAFETY: As above; it holds `iter_len` bytes from 0.
                let used =
                    unsafe { self.skb(iter, offset - pos, (pos + iter_len - offset).min(len)) };
                taken += used;
                offset += used;
                len -= used;
            }
            pos += iter_len;
            // SAFETY: As above: the next skb of the list, or NULL.
            iter = unsafe { (*iter).__bindgen_anon_1.__bindgen_anon_1.next }.cast_const();
        }
        taken
    }
}

/// An owned kernel socket (`struct socket`), released on drop.
///
/// # Invariants
///
/// `sock` is a live socket from `sock_create` or `kernel_accept`, owned by this object.
struct RawSocket {
    sock: NonNull<bindings::socket>,
}

impl RawSocket {
    fn sk(&self) -> *mut bindings::sock {
        // SAFETY: A live socket of the TCP family always has its `sk`.
        unsafe { (*self.sock.as_ptr()).sk }
    }

    /// The socket, as the kernel's own bindings (of its exported functions) name it.
    fn as_kernel(&self) -> *mut kernel::bindings::socket {
        self.sock.as_ptr().cast()
    }

    /// What riw's sockets have: no Nagle delay, and a local address reusable at once.
    fn setup(&self) {
        let sk = self.sk();
        // SAFETY: A live TCP socket, set up in process context before any use.
        unsafe {
            bindings::riw_tcp_sock_set_nodelay(sk);
            bindings::riw_sock_set_reuseaddr(sk);
        }
    }

    fn create(netdev: &NetDevice, family: i32) -> Result<Self> {
        let mut sock = core::ptr::null_mut();
        // SAFETY: `netdev` is alive; on success `sock` is a new socket we own.
        let ret = unsafe { bindings::riw_sock_create(netdev.as_raw(), family, &mut sock) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        let sock = NonNull::new(sock).ok_or(ENOMEM)?;
        let this = Self { sock };
        this.setup();
        Ok(this)
    }

    fn bind(&self, addr: &SocketAddr) -> Result {
        let mut ss = addr.to_storage();
        // SAFETY: A live socket and an address of its family, of the length given.
        to_result(unsafe {
            kernel::bindings::kernel_bind(
                self.as_kernel(),
                ptr::from_mut(&mut ss).cast(),
                addr.storage_len(),
            )
        })
    }

    /// Starts connecting to `addr` without waiting (EINPROGRESS).
    fn connect(&self, addr: &SocketAddr) -> Result {
        let mut ss = addr.to_storage();
        // SAFETY: As for `bind`.
        to_result(unsafe {
            kernel::bindings::kernel_connect(
                self.as_kernel(),
                ptr::from_mut(&mut ss).cast(),
                addr.storage_len(),
                kernel::bindings::O_NONBLOCK as c_int,
            )
        })
    }

    fn name(&self, peer: bool) -> Result<SocketAddr> {
        let mut ss = bindings::__kernel_sockaddr_storage::default();
        let addr = ptr::from_mut(&mut ss).cast();
        // SAFETY: A live socket; `ss` is large enough for any address. Both return the
        // address's length, or an error.
        to_result(unsafe {
            if peer {
                kernel::bindings::kernel_getpeername(self.as_kernel(), addr)
            } else {
                kernel::bindings::kernel_getsockname(self.as_kernel(), addr)
            }
        })?;
        SocketAddr::from_storage(&ss)
    }

    fn state(&self) -> TcpState {
        // SAFETY: A live socket; the state is read once.
        TcpState::from_raw(unsafe { bindings::riw_sock_state(self.sk()) })
    }
}

impl Drop for RawSocket {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant); no callback of ours is installed any more (the
        // owners detach before dropping).
        unsafe { bindings::sock_release(self.sock.as_ptr()) };
    }
}

fn to_result(ret: core::ffi::c_int) -> Result {
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else {
        Ok(())
    }
}

/// A socket callback (`sk_data_ready`, `sk_state_change` or `sk_write_space`).
type SockCallback = Option<unsafe extern "C" fn(sk: *mut bindings::sock)>;

/// The socket callbacks a handler takes over.
#[derive(Clone, Copy)]
struct SockCallbacks {
    data_ready: SockCallback,
    state_change: SockCallback,
    write_space: SockCallback,
}

impl SockCallbacks {
    /// Makes `self` the callbacks of `sk`; returns those it had.
    ///
    /// # Safety
    ///
    /// `sk` is live, and the caller holds its `sk_callback_lock` for writing.
    unsafe fn replace(&self, sk: *mut bindings::sock) -> Self {
        // SAFETY: `sk` is live; the callback lock, which the caller holds, is what the
        // socket layer asks of whoever changes the callbacks (TCP calls them without it,
        // as it does those that the kernel's own users of sockets install).
        unsafe {
            Self {
                data_ready: ptr::replace(&raw mut (*sk).sk_data_ready, self.data_ready),
                state_change: ptr::replace(&raw mut (*sk).sk_state_change, self.state_change),
                write_space: ptr::replace(&raw mut (*sk).sk_write_space, self.write_space),
            }
        }
    }
}

/// A handler bound to a socket: the socket holds one reference to `H` in `sk_user_data`.
struct Binding<H> {
    /// The callbacks the socket had before.
    saved: SockCallbacks,
    _handler: PhantomData<Arc<H>>,
}

/// Trampolines of one handler type; `LISTENER` ones ignore sockets that are not listening
/// (connections a listener accepted inherit its callbacks until the owner replaces them).
struct Callbacks<H, const LISTENER: bool>(PhantomData<H>);

impl<H: SocketHandler, const LISTENER: bool> Callbacks<H, LISTENER> {
    const TABLE: SockCallbacks = SockCallbacks {
        data_ready: Some(Self::data_ready),
        state_change: Some(Self::state_change),
        write_space: Some(Self::write_space),
    };

    /// Runs `call` with the handler bound to `sk`, if any (and, for `LISTENER`, if `sk` is
    /// listening), whether this context holds the socket's lock, and, with `readable` and
    /// if this context holds the lock, the bytes the socket holds to read (else 0).
    ///
    /// Callbacks read `sk_user_data` under RCU rather than `sk_callback_lock`: they run
    /// from softirq and from the socket's backlog processing, under socket locks, and
    /// lockdep finds the callback lock taken there in an order the TCP stack's own use
    /// conflicts with (`inet_csk_listen_stop` takes it under the socket spinlock).
    ///
    /// # Safety
    ///
    /// Called by the socket layer on a live `sk`.
    #[inline(always)]
    unsafe fn dispatch(
        sk: *mut bindings::sock,
        readable: bool,
        call: impl FnOnce(&Arc<H>, bool, usize),
    ) {
        // Whether this context holds the socket's lock: TCP calls the callbacks in softirq
        // under the socket's spinlock when no task owns the socket
        // (`sock_owned_by_user_nocheck`), and in the owning task itself when it processes
        // the socket's backlog in `release_sock()`.
        // SAFETY: `sk` is live; `owned` changes under the socket's spinlock, so it is
        // read once.
        let locked = unsafe { read_once(&raw const (*sk).sk_lock.owned) } == 0
            // SAFETY: Plain call; it reads this CPU's preemption count.
            || unsafe { bindings::riw_in_task() };
        // For data-ready, what it may read: a call of its own was two more block lookups.
        let readable = if readable && locked {
            // SAFETY: A live TCP socket whose lock this context holds.
            unsafe { bindings::riw_tcp_inq(sk) }.max(0) as usize
        } else {
            0
        };
        // SAFETY: Left below, in this function.
        unsafe { bindings::riw_rcu_read_lock() };
        // SAFETY: `sk` is live; in the RCU read section.
        let data = unsafe { bindings::riw_sk_user_data_nocopy_rcu(sk) };
        // SAFETY: As above.
        let ours = !LISTENER || unsafe { bindings::riw_sock_state(sk) } == TCP_LISTEN;
        if !data.is_null() && ours {
            // SAFETY: Non-NULL in the RCU read section: the reference `install` stored for
            // this handler type (trampolines are per type); `uninstall` drops it only after
            // clearing it and a grace period, so after this section.
            let handler = unsafe { Arc::from_raw(data.cast::<H>()) };
            let handler = core::mem::ManuallyDrop::new(handler);
            call(&handler, locked, readable);
        }
        // SAFETY: Entered above, on this task.
        unsafe { bindings::riw_rcu_read_unlock() };
    }

    unsafe extern "C" fn data_ready(sk: *mut bindings::sock) {
        if LISTENER {
            // SAFETY: Called by the socket layer on a live socket.
            return unsafe {
                Self::dispatch(sk, false, |h, _, _| {
                    H::socket_event(h, SocketEvent::DataReady)
                })
            };
        }
        // INVARIANT: Handed out only where `dispatch` found that this context holds the
        // socket's lock for the call.
        let locked = LockedSocket {
            sk,
            _locked: PhantomData,
        };
        // SAFETY: As above.
        unsafe {
            Self::dispatch(sk, true, |h, is_locked, readable| {
                H::data_ready(h, is_locked.then_some((&locked, readable)))
            })
        }
    }

    unsafe extern "C" fn state_change(sk: *mut bindings::sock) {
        // SAFETY: As above.
        unsafe {
            Self::dispatch(sk, false, |h, _, _| {
                H::socket_event(h, SocketEvent::StateChange)
            })
        }
    }

    unsafe extern "C" fn write_space(sk: *mut bindings::sock) {
        // TCP calls this on every acknowledgement while a send of ours is refused for room
        // (SOCK_NOSPACE). As its own callback (`sk_stream_write_space`) wakes a writer, the
        // handler hears of it only once a third of the send buffer is free (room for half
        // of what it holds), and the flag is cleared: not once per acknowledgement, to send
        // the few segments it freed.
        // SAFETY: Called by the socket layer on a live socket, under its lock; `sk_socket`
        // is set while a socket of ours is bound (and checked, as TCP's callback does).
        unsafe {
            let sock = (*sk).sk_socket;
            if sock.is_null() || !bindings::riw_sk_stream_is_writeable(sk) {
                return;
            }
            bindings::riw_sock_clear_nospace(sock);
        }
        // SAFETY: As above.
        unsafe {
            Self::dispatch(sk, false, |h, _, _| {
                H::socket_event(h, SocketEvent::WriteSpace)
            })
        }
    }
}

impl<H: SocketHandler> Binding<H> {
    fn install<const LISTENER: bool>(sock: &RawSocket, handler: Arc<H>) -> Self {
        let sk = sock.sk();
        let data = Arc::into_raw(handler).cast_mut().cast::<c_void>();
        // NOCOPY: connections a listener accepts do not inherit the pointer.
        // SAFETY: A live socket, its callback lock held for writing to the unlock; the
        // socket now holds the handler reference `data`, published before the callbacks.
        let saved = unsafe {
            bindings::riw_write_lock_bh(&raw mut (*sk).sk_callback_lock);
            bindings::riw_sk_user_data_set_nocopy(sk, data);
            let saved = Callbacks::<H, LISTENER>::TABLE.replace(sk);
            bindings::riw_write_unlock_bh(&raw mut (*sk).sk_callback_lock);
            saved
        };
        Self {
            saved,
            _handler: PhantomData,
        }
    }

    fn uninstall(self, sock: &RawSocket) {
        let sk = sock.sk();
        // SAFETY: A live socket with our callbacks installed, whose callback lock is held
        // for writing from here to the unlock: takes our pointer back and restores the
        // callbacks it had before.
        let data = unsafe {
            bindings::riw_write_lock_bh(&raw mut (*sk).sk_callback_lock);
            let data = bindings::riw_sk_user_data_nocopy_locked(sk);
            bindings::riw_sk_user_data_clear(sk);
            self.saved.replace(sk);
            bindings::riw_write_unlock_bh(&raw mut (*sk).sk_callback_lock);
            data
        };
        // Callbacks still running hold the pointer in an RCU read section: none of ours
        // runs after this. It sleeps: sockets are released in process context.
        // SAFETY: Plain call, in process context.
        unsafe { kernel::bindings::synchronize_rcu() };
        if !data.is_null() {
            // SAFETY: The reference `install` stored, now back with us.
            drop(unsafe { Arc::from_raw(data.cast::<H>()) });
        }
    }
}

/// The owner of zero-copy sends, told when TCP no longer needs their pages.
pub trait ZeroCopyOwner: Send + Sync + 'static {
    /// TCP holds none of the pages sent with the ticket of `token` any more, and the ticket
    /// was dropped; `copied` if they were copied on their way all the same (delivery to a
    /// socket of this host does: veth, loopback). Runs in any context, softirq included,
    /// possibly under the socket's lock (TCP frees acknowledged data as it processes an
    /// ACK): it must not sleep nor use the socket.
    fn released(this: Arc<Self>, token: u64, copied: bool);
}

/// A zero-copy send in progress (`struct ubuf_info`): TCP holds a reference for each skb
/// with pages of it, this object one more. When all are gone, its owner's `released`
/// runs with the owner reference the ticket kept.
///
/// # Invariants
///
/// `zc` is a live `ZeroCopy`, from a `KBox`, of which this object holds one reference.
pub struct ZeroCopyTicket {
    zc: NonNull<ZeroCopy>,
}

/// What TCP sees of a zero-copy send, and whom to tell when it is done. TCP takes a page
/// reference for every piece it is handed and a reference on `ubuf` for every skb holding
/// such pieces; the ticket holds one more until it is dropped. The last reference dropped
/// means TCP needs none of the pages any more (sent and acknowledged, or the connection
/// gone): the owner hears of it, and this is freed.
///
/// Only the fields TCP does not change are ever read through a shared reference: `ubuf`
/// is reached through raw pointers.
#[repr(C)]
struct ZeroCopy {
    /// First: the `ubuf_info` TCP holds is at the address of the whole.
    ubuf: kernel::bindings::ubuf_info,
    released: unsafe fn(owner: *mut c_void, token: u64, copied: bool),
    owner: *mut c_void,
    token: u64,
    /// Some skb's pieces were copied on their way (delivery to a local socket does).
    copied: AtomicBool,
}

/// TCP's callback for riw's `ubuf_info`s.
static ZERO_COPY_OPS: kernel::bindings::ubuf_info_ops = kernel::bindings::ubuf_info_ops {
    complete: Some(zero_copy_complete),
    link_skb: None,
};

/// Drops one reference of a `ZeroCopy` (`ubuf_info_ops.complete`, also what
/// `net_zcopy_put()` calls); `success` false if the pieces of an skb were copied. The last
/// reference frees it and tells its owner.
///
/// # Safety
///
/// `uarg` is the `ubuf` of a live `ZeroCopy`, and the caller gives up one reference of it.
unsafe extern "C" fn zero_copy_complete(
    _skb: *mut kernel::bindings::sk_buff,
    uarg: *mut kernel::bindings::ubuf_info,
    success: bool,
) {
    // `ubuf` is the first field of a `repr(C)` struct.
    let zc = uarg.cast::<ZeroCopy>();
    // SAFETY: A live `ZeroCopy` (the caller's guarantee), whose other fields TCP does not
    // touch; ours stays until our reference is dropped, below.
    let (released, owner, token, copied) =
        unsafe { ((*zc).released, (*zc).owner, (*zc).token, &(*zc).copied) };
    if !success {
        copied.store(true, Ordering::Relaxed);
    }
    // SAFETY: The caller's reference, dropped once; the count is TCP's as well, changed
    // only atomically.
    if !unsafe { kernel::bindings::refcount_dec_and_test(&raw mut (*zc).ubuf.refcnt) } {
        return;
    }
    // The last one: every store to `copied` came before its reference was dropped, and
    // the count orders the drops before this.
    let copied = copied.load(Ordering::Relaxed);
    // SAFETY: The `KBox` that `ZeroCopyTicket::new` leaked; no reference is left.
    drop(unsafe { KBox::from_raw(zc) });
    // workqueue::release::exit() waits for this section before the module goes.
    // SAFETY: Left below, in this function.
    unsafe { bindings::riw_rcu_read_lock() };
    // SAFETY: `owner` is what `ZeroCopyTicket::new` passed `released` with, handed back
    // once: this runs once, for the last reference.
    unsafe { released(owner, token, copied) };
    // SAFETY: Entered above.
    unsafe { bindings::riw_rcu_read_unlock() };
}

// SAFETY: The reference count is atomic and the release may run on any thread (the owner
// is `Send + Sync`).
unsafe impl Send for ZeroCopyTicket {}
// SAFETY: Shared use only passes the pointer to TCP, which takes its own references.
unsafe impl Sync for ZeroCopyTicket {}

impl ZeroCopyTicket {
    /// A ticket that will call `O::released(owner, token)`.
    pub fn new<O: ZeroCopyOwner>(owner: Arc<O>, token: u64) -> Result<Self> {
        let owner = Arc::into_raw(owner).cast_mut().cast::<c_void>();
        let zc = KBox::new(
            ZeroCopy {
                ubuf: kernel::bindings::ubuf_info {
                    ops: &ZERO_COPY_OPS,
                    // The ticket's reference.
                    refcnt: kernel::bindings::refcount_t {
                        refs: kernel::bindings::atomic_t { counter: 1 },
                    },
                    flags: ZC_FLAGS,
                },
                released: released::<O>,
                owner,
                token,
                copied: AtomicBool::new(false),
            },
            GFP_KERNEL,
        );
        match zc {
            // INVARIANT: From a `KBox`, with the one reference this ticket holds.
            Ok(zc) => Ok(Self {
                zc: NonNull::from(KBox::leak(zc)),
            }),
            Err(e) => {
                // SAFETY: `owner` from `Arc::into_raw` above, handed to no one.
                drop(unsafe { Arc::from_raw(owner.cast::<O>()) });
                Err(e.into())
            }
        }
    }

    /// The `ubuf_info` TCP takes references of.
    fn ubuf(&self) -> *mut kernel::bindings::ubuf_info {
        // SAFETY: A live `ZeroCopy` (type invariant); only its address is taken.
        unsafe { &raw mut (*self.zc.as_ptr()).ubuf }
    }
}

impl Drop for ZeroCopyTicket {
    fn drop(&mut self) {
        // SAFETY: Our reference (type invariant), dropped once, as `net_zcopy_put()`
        // drops it; the last one calls the owner, here or wherever TCP frees the last skb.
        unsafe { zero_copy_complete(ptr::null_mut(), self.ubuf(), true) };
    }
}

/// The release callback of tickets of owner type `O`.
///
/// # Safety
///
/// `owner` is the reference `ZeroCopyTicket::new` made with `Arc::into_raw`, passed once.
unsafe fn released<O: ZeroCopyOwner>(owner: *mut c_void, token: u64, copied: bool) {
    // SAFETY: See the function's safety section: the reference comes back to us here.
    let owner = unsafe { Arc::from_raw(owner.cast::<O>()) };
    O::released(owner, token, copied);
}

/// A TCP connection socket, optionally with a handler of type `H` attached.
pub struct TcpStream<H: SocketHandler> {
    // Dropped after `binding` is uninstalled (see `Drop`).
    sock: RawSocket,
    binding: Option<Binding<H>>,
}

// SAFETY: A socket may be used from any thread; the handler is `Send + Sync`.
unsafe impl<H: SocketHandler> Send for TcpStream<H> {}
// SAFETY: All methods take `&mut self` or call socket functions that lock the socket.
unsafe impl<H: SocketHandler> Sync for TcpStream<H> {}

impl<H: SocketHandler> TcpStream<H> {
    /// Starts a non-blocking connection to `remote` in `netdev`'s namespace, from `local`
    /// (with its port if it is free, else any). The result arrives as state changes.
    pub fn connect(
        netdev: &NetDevice,
        local: &SocketAddr,
        remote: &SocketAddr,
        handler: Arc<H>,
    ) -> Result<Self> {
        let sock = RawSocket::create(netdev, remote.family())?;
        if sock.bind(local).is_err() {
            sock.bind(&local.with_port(0))?;
        }
        let mut this = Self {
            sock,
            binding: None,
        };
        this.attach(handler);
        match this.sock.connect(remote) {
            Err(e) if e.to_errno() != -(bindings::EINPROGRESS as i32) => Err(e),
            _ => Ok(this),
        }
    }

    /// Binds `handler` to the socket's callbacks (replacing any previous one).
    pub fn attach(&mut self, handler: Arc<H>) {
        self.detach();
        self.binding = Some(Binding::install::<false>(&self.sock, handler));
    }

    /// Unbinds the handler; no callback reaches it once this returns.
    pub fn detach(&mut self) {
        if let Some(binding) = self.binding.take() {
            binding.uninstall(&self.sock);
        }
    }

    pub fn state(&self) -> TcpState {
        self.sock.state()
    }

    /// The TCP state's name, as `ss` prints it.
    pub fn state_name(&self) -> &'static str {
        // SAFETY: A live socket; the state is read once.
        tcp_state_name(unsafe { bindings::riw_sock_state(self.sock.sk()) })
    }

    /// Bytes handed to TCP that the peer has not acknowledged yet, sent or not.
    pub fn unacked_bytes(&self) -> u32 {
        let sk = self.sock.sk();
        // SAFETY: A live TCP socket.
        let tp = unsafe { bindings::riw_tcp_sk(sk) };
        // SAFETY: `tp` is live and its fields aligned; TCP changes them under the socket's
        // lock, not taken here, so each is read once (as `ss` reads them, a snapshot).
        let (write_seq, snd_una) = unsafe {
            (
                read_once(&raw const (*tp).write_seq),
                read_once(&raw const (*tp).snd_una),
            )
        };
        write_seq.wrapping_sub(snd_una)
    }

    /// Takes the socket's pending error (as `sock_error`), if any.
    pub fn take_error(&self) -> Option<Error> {
        // SAFETY: A live socket.
        let ret = unsafe { bindings::riw_sock_error(self.sock.sk()) };
        (ret != 0).then(|| Error::from_errno(ret))
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.sock.name(false)
    }

    pub fn peer_addr(&self) -> Result<SocketAddr> {
        self.sock.name(true)
    }

    /// Segments TCP retransmitted on this connection so far.
    pub fn retransmits(&self) -> u32 {
        // SAFETY: A live TCP socket is the `sock` of a `tcp_sock`.
        let tp = unsafe { bindings::riw_tcp_sk(self.sock.sk()) };
        // SAFETY: `tp` is live and the field aligned; TCP changes it under the socket's
        // lock, so it is read once, as READ_ONCE() does.
        unsafe { read_once(&raw const (*tp).total_retrans) }
    }

    /// The current maximum segment size.
    pub fn mss(&self) -> u32 {
        // SAFETY: A live TCP socket.
        unsafe { bindings::riw_sock_mss(self.sock.sock.as_ptr()) }
    }

    /// Whether TCP holds none of our bytes, neither unsent nor unacknowledged. A send
    /// that found no room then (an allocation failed) hears of no write space later: no
    /// acknowledgement is coming to free any.
    pub fn send_queue_empty(&self) -> bool {
        // SAFETY: A live socket; reads one word.
        unsafe { bindings::riw_sk_wmem_queued(self.sock.sk()) == 0 }
    }

    /// Sends what fits of `buf` without blocking; `more`: more data follows at once.
    /// Returns the bytes taken (EAGAIN if none fit).
    pub fn send(&self, buf: &[u8], more: bool) -> Result<usize> {
        self.send_copied(buf, if more { MSG_MORE } else { 0 })
    }

    /// As `send`, for bytes that end a record (`MSG_EOR`): once TCP took all of them, it
    /// adds no later bytes to the buffer they end, so the next record starts a segment of
    /// its own. Taken in part, the rest goes on in the same buffer, as with `send`.
    pub fn send_record_end(&self, buf: &[u8], more: bool) -> Result<usize> {
        self.send_copied(buf, MSG_EOR | if more { MSG_MORE } else { 0 })
    }

    #[inline(always)]
    fn send_copied(&self, buf: &[u8], flags: c_uint) -> Result<usize> {
        let mut msg = kernel::bindings::msghdr {
            msg_flags: MSG_DONTWAIT | MSG_NOSIGNAL | flags,
            ..Default::default()
        };
        let iov = kernel::bindings::kvec {
            iov_base: buf.as_ptr().cast_mut().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: `iov` names `buf`, which TCP only reads (a source), and outlives `msg`.
        unsafe {
            kernel::bindings::iov_iter_kvec(
                &mut msg.msg_iter,
                kernel::bindings::ITER_SOURCE,
                &iov,
                1,
                buf.len(),
            )
        };
        // SAFETY: `msg` is a source of `buf.len()` bytes.
        unsafe { self.sendmsg(&mut msg, buf.len()) }
    }

    /// Hands `msg`, of `len` bytes, to TCP, the socket locked around the call; returns how
    /// many it took. What `tcp_sendmsg()` does, without the socket layer's calls above it
    /// (60 of the 150 instructions from here to TCP, for every FPDU): the socket is a
    /// kernel TCP socket of ours, which no LSM policy governs.
    ///
    /// # Safety
    ///
    /// `msg`'s iterator is a source of `len` bytes, valid for the call, of pages TCP may
    /// take references to if `msg` asks to splice them.
    #[inline(always)]
    unsafe fn sendmsg(&self, msg: &mut kernel::bindings::msghdr, len: usize) -> Result<usize> {
        let sock = self.sock.sock.as_ptr();
        // SAFETY: A live TCP socket, locked around the send as `tcp_sendmsg_locked()`
        // asks, on this task; `msg` as the caller guarantees.
        let ret = unsafe {
            bindings::riw_sock_lock(sock);
            let ret =
                bindings::riw_tcp_sendmsg_locked(self.sock.sk(), ptr::from_mut(msg).cast(), len);
            bindings::riw_sock_unlock(sock);
            ret
        };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(ret as usize)
    }

    /// Hands kernel memory `pieces` to TCP in order, without blocking; returns how many
    /// bytes it took (EAGAIN if none). Their pages go to TCP by reference (it takes its
    /// own) when TCP may hold such pages (`sendpage_ok()`: not slab memory), else their
    /// bytes are copied. TCP may then send what the pages hold later than this call, on a
    /// retransmission: only for memory that stays as it is until the peer has it.
    pub fn send_pieces(&self, pieces: &KernelPieces, more: bool) -> Result<usize> {
        const PIECES: usize = KernelPieces::CAPACITY;
        let mut vecs = [const { MaybeUninit::<kernel::bindings::bio_vec>::uninit() }; PIECES];
        let mut splice = true;
        let (mut bytes, mut count) = (0, 0);
        for (vec, piece) in vecs.iter_mut().zip(pieces.iter()) {
            let (page, offset, len) = piece.page();
            // SAFETY: A page the piece holds a reference on.
            splice &= unsafe { bindings::riw_sendpage_ok(page.as_ptr()) };
            // bvec_set_page(): `len` bytes from `offset`, within the page.
            vec.write(kernel::bindings::bio_vec {
                bv_page: page.as_ptr().cast(),
                bv_len: len,
                bv_offset: offset,
            });
            bytes += len as usize;
            count += 1;
        }
        if count == 0 {
            return Err(EINVAL);
        }
        let mut msg = kernel::bindings::msghdr {
            msg_flags: MSG_DONTWAIT
                | MSG_NOSIGNAL
                | if more { MSG_MORE } else { 0 }
                | if splice { MSG_SPLICE_PAGES } else { 0 },
            ..Default::default()
        };
        // SAFETY: The first `count` entries of `vecs`, which outlives `msg`, are written
        // and hold `bytes` bytes; TCP reads them (a source).
        unsafe {
            kernel::bindings::iov_iter_bvec(
                &mut msg.msg_iter,
                kernel::bindings::ITER_SOURCE,
                vecs.as_ptr().cast(),
                count as _,
                bytes,
            )
        };
        // SAFETY: `msg` is a source of `bytes` bytes of pages the pieces keep referenced
        // for the call, spliced only if `sendpage_ok()` let TCP reference them all, which
        // it may then do: the caller's memory stays as it is.
        unsafe { self.sendmsg(&mut msg, bytes) }
    }

    /// Hands `len` bytes at `offset` of pinned user memory to TCP without copying them and
    /// without blocking; returns how many it took (fewer if it is full; EAGAIN if none).
    /// TCP keeps references to the pages until it no longer needs them, and `ticket` hears
    /// when that is.
    pub fn send_user_memory(
        &self,
        mem: &UserMemory,
        mut offset: usize,
        mut len: usize,
        ticket: &ZeroCopyTicket,
        more: bool,
    ) -> Result<usize> {
        // Pieces of pinned memory per sendmsg call; an FPDU's payload rarely spans more.
        const PIECES: usize = 16;
        let length = mem.len();
        if offset > length || len > length - offset {
            return Err(EINVAL);
        }
        let mut pieces = [const { MaybeUninit::<kernel::bindings::bio_vec>::uninit() }; PIECES];
        let mut sent = 0;
        while len != 0 {
            let mut msg = kernel::bindings::msghdr {
                msg_flags: MSG_DONTWAIT | MSG_NOSIGNAL | MSG_ZEROCOPY,
                msg_ubuf: ticket.ubuf(),
                ..Default::default()
            };
            let (mut count, mut bytes) = (0, 0);
            while count < PIECES && bytes < len {
                // `offset + bytes` is within the region (checked above, and `bytes`
                // stays below the `len` checked there).
                let Some((page, in_page, n)) = mem.page_piece(offset + bytes, len - bytes) else {
                    // The range is inside the region, whose table is whole: a bug.
                    // SAFETY: Warns, once.
                    unsafe { bindings::riw_warn_on_once(true) };
                    return if sent != 0 { Ok(sent) } else { Err(EFAULT) };
                };
                // bvec_set_page(): `n` bytes from `in_page`, within the page.
                pieces[count].write(kernel::bindings::bio_vec {
                    bv_page: page.as_ptr().cast(),
                    bv_len: n as c_uint,
                    bv_offset: in_page as c_uint,
                });
                count += 1;
                bytes += n;
            }
            if more || bytes < len {
                msg.msg_flags |= MSG_MORE;
            }
            // SAFETY: The first `count` pieces are written, `bytes` bytes in all, of pinned
            // pages that the umem keeps while TCP takes its own references; TCP reads them
            // (a source), and `pieces` outlives `msg`.
            unsafe {
                kernel::bindings::iov_iter_bvec(
                    &mut msg.msg_iter,
                    kernel::bindings::ITER_SOURCE,
                    pieces.as_ptr().cast(),
                    count as _,
                    bytes,
                )
            };
            // SAFETY: A live socket; `msg` is a zero-copy source whose `ubuf_info` the
            // ticket keeps alive for the call (TCP takes a reference for each skb that
            // keeps pages of it).
            let ret = unsafe { kernel::bindings::sock_sendmsg(self.sock.as_kernel(), &mut msg) };
            if ret < 0 {
                return if sent != 0 {
                    Ok(sent)
                } else {
                    Err(Error::from_errno(ret))
                };
            }
            let ret = ret as usize;
            sent += ret;
            offset += ret;
            len -= ret;
            if ret < bytes {
                break;
            }
        }
        Ok(sent)
    }

    /// Receives what is there, up to `buf.len()` bytes, without blocking: 0 at end of
    /// stream, EAGAIN if nothing is there yet.
    pub fn recv(&self, buf: &mut [u8]) -> Result<usize> {
        let mut msg = kernel::bindings::msghdr::default();
        let mut iov = kernel::bindings::kvec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: A live socket; `iov` names `buf`, valid for writes of its length.
        let ret = unsafe {
            kernel::bindings::kernel_recvmsg(
                self.sock.as_kernel(),
                &mut msg,
                &mut iov,
                1,
                buf.len(),
                MSG_DONTWAIT as c_int,
            )
        };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(ret as usize)
    }

    /// Whether nothing waits to be read: no bytes, no end of stream, no error. A hint,
    /// taken without the socket's lock (as `poll` does): what arrives after it raises the
    /// socket's callbacks.
    pub fn nothing_to_read(&self) -> bool {
        // SAFETY: A live TCP socket.
        unsafe { nothing_to_read(self.sock.sk()) }
    }

    /// Runs `f` with the socket locked (`lock_sock`); `f` must not use the socket other
    /// than through the `LockedSocket` (sending would lock it again). Data that arrives
    /// meanwhile is processed when the lock goes, in this context.
    pub fn with_lock<R>(&self, f: impl FnOnce(&LockedSocket<'_>) -> R) -> R {
        let sock = self.sock.sock.as_ptr();
        // SAFETY: A live socket; unlocked below, on the same task.
        unsafe { bindings::riw_sock_lock(sock) };
        // INVARIANT: Locked until after `f` returns, and `f` cannot keep the reference.
        let locked = LockedSocket {
            sk: self.sock.sk(),
            _locked: PhantomData,
        };
        let result = f(&locked);
        // SAFETY: Locked above, by this task.
        unsafe { bindings::riw_sock_unlock(sock) };
        result
    }

    /// Makes the close that dropping the socket does an abortive one (RST).
    pub fn set_abort_on_close(&self) {
        // SAFETY: A live socket.
        unsafe { bindings::riw_sock_no_linger(self.sock.sock.as_ptr()) };
    }
}

impl<H: SocketHandler> Drop for TcpStream<H> {
    fn drop(&mut self) {
        self.detach();
    }
}

/// A listening TCP socket with a handler of type `H`, told of new connections.
pub struct TcpListener<H: SocketHandler> {
    sock: RawSocket,
    binding: Option<Binding<H>>,
}

// SAFETY: As for `TcpStream`.
unsafe impl<H: SocketHandler> Send for TcpListener<H> {}
// SAFETY: As for `TcpStream`.
unsafe impl<H: SocketHandler> Sync for TcpListener<H> {}

impl<H: SocketHandler> TcpListener<H> {
    /// Listens on `addr` in `netdev`'s namespace; a wildcard address is bound to `netdev`
    /// alone, so that devices on other netdevs may listen on the same port. `v6_only`: an
    /// IPv6 address leaves the IPv4 one of the same port free (`IPV6_V6ONLY`).
    pub fn listen(
        netdev: &NetDevice,
        addr: &SocketAddr,
        backlog: u32,
        v6_only: bool,
        handler: Arc<H>,
    ) -> Result<Self> {
        let sock = RawSocket::create(netdev, addr.family())?;
        if v6_only && matches!(addr, SocketAddr::V6 { .. }) {
            // SAFETY: A live socket, not bound yet.
            to_result(unsafe { bindings::riw_sock_set_v6only(sock.sock.as_ptr()) })?;
        }
        if addr.is_wildcard() {
            // SAFETY: A live socket and device.
            to_result(unsafe {
                bindings::riw_sock_bind_to_netdev(sock.sock.as_ptr(), netdev.as_raw())
            })?;
        }
        sock.bind(addr)?;
        let binding = Some(Binding::install::<true>(&sock, handler));
        let this = Self { sock, binding };
        let backlog = c_int::try_from(backlog).unwrap_or(c_int::MAX);
        // SAFETY: A live, bound socket.
        to_result(unsafe { kernel::bindings::kernel_listen(this.sock.as_kernel(), backlog) })?;
        Ok(this)
    }

    /// Takes the next connection waiting, if any (EAGAIN if none). Its callbacks are the
    /// listener's, which ignore it, until `attach` gives it a handler of its own.
    pub fn accept<S: SocketHandler>(&self) -> Result<TcpStream<S>> {
        let mut new = ptr::null_mut();
        // SAFETY: A live listening socket; on success `new` is a socket we own.
        to_result(unsafe {
            kernel::bindings::kernel_accept(
                self.sock.as_kernel(),
                &mut new,
                kernel::bindings::O_NONBLOCK as c_int,
            )
        })?;
        let sock = RawSocket {
            sock: NonNull::new(new.cast()).ok_or(EINVAL)?,
        };
        sock.setup();
        Ok(TcpStream {
            sock,
            binding: None,
        })
    }
}

impl<H: SocketHandler> Drop for TcpListener<H> {
    fn drop(&mut self) {
        if let Some(binding) = self.binding.take() {
            binding.uninstall(&self.sock);
        }
    }
}

/// Whether a message about a misbehaving peer may be logged now (`net_ratelimit`).
pub fn ratelimit() -> bool {
    // SAFETY: Plain call; the state is global to the networking core.
    unsafe { bindings::net_ratelimit() != 0 }
}
