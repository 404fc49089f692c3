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
use super::rdma::UserMemory;
use core::ffi::c_void;
use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;
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
const TCP_CLOSE: i32 = 7;
const TCP_CLOSE_WAIT: i32 = 8;
const TCP_LISTEN: i32 = 10;
const TCP_NEW_SYN_RECV: i32 = 12;

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
    /// Send buffer space became available.
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
        let ctx = core::ptr::from_mut(reader).cast::<c_void>();
        let mut drained = false;
        // SAFETY: A live, locked TCP socket (type invariant); `ctx` points to `reader`,
        // alive and not otherwise used for the call, which is the only time
        // `read_chunk::<F>` runs with it; `drained` is a local.
        let ret = unsafe {
            bindings::riw_sock_read_locked(self.sk, Some(read_chunk::<F>), ctx, &mut drained)
        };
        if ret < 0 {
            return (Err(Error::from_errno(ret)), drained);
        }
        (Ok(ret as usize), drained)
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

    fn create(netdev: &NetDevice, family: i32) -> Result<Self> {
        let mut sock = core::ptr::null_mut();
        // SAFETY: `netdev` is alive; on success `sock` is a new socket we own.
        let ret = unsafe { bindings::riw_sock_create(netdev.as_raw(), family, &mut sock) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        let sock = NonNull::new(sock).ok_or(ENOMEM)?;
        let this = Self { sock };
        // SAFETY: A live TCP socket.
        unsafe { bindings::riw_sock_setup(this.sock.as_ptr()) };
        Ok(this)
    }

    fn bind(&self, addr: &SocketAddr) -> Result {
        let mut ss = addr.to_storage();
        // SAFETY: A live socket and a valid address of its family.
        to_result(unsafe { bindings::riw_sock_bind(self.sock.as_ptr(), &mut ss) })
    }

    fn name(&self, peer: bool) -> Result<SocketAddr> {
        let mut ss = bindings::__kernel_sockaddr_storage::default();
        // SAFETY: A live socket; `ss` is large enough for any address.
        to_result(unsafe { bindings::riw_sock_name(self.sock.as_ptr(), &mut ss, peer) })?;
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

/// The callbacks a socket had before a handler was attached.
#[derive(Default)]
struct Saved(bindings::riw_sock_callbacks);

/// A handler bound to a socket: the socket holds one reference to `H` in `sk_user_data`.
struct Binding<H> {
    saved: Saved,
    _handler: PhantomData<Arc<H>>,
}

/// Trampolines of one handler type; `LISTENER` ones ignore sockets that are not listening
/// (connections a listener accepted inherit its callbacks until the owner replaces them).
struct Callbacks<H, const LISTENER: bool>(PhantomData<H>);

impl<H: SocketHandler, const LISTENER: bool> Callbacks<H, LISTENER> {
    const TABLE: bindings::riw_sock_callbacks = bindings::riw_sock_callbacks {
        data_ready: Some(Self::data_ready),
        state_change: Some(Self::state_change),
        write_space: Some(Self::write_space),
    };

    /// Runs `call` with the handler bound to `sk`, if any (and, for `LISTENER`, if `sk` is
    /// listening), and whether this context holds the socket's lock (see
    /// `riw_sock_callback_begin`); with `readable` not NULL, first stores there the bytes
    /// the socket holds to read, if this context holds its lock.
    ///
    /// # Safety
    ///
    /// Called by the socket layer on a live `sk`; `readable` is NULL or valid for a write.
    unsafe fn dispatch(
        sk: *mut bindings::sock,
        readable: *mut usize,
        call: impl FnOnce(&Arc<H>, bool),
    ) {
        let mut locked = false;
        // SAFETY: `sk` is live; `readable` is NULL or valid for a write; the RCU read
        // section is entered here and left below.
        let data = unsafe { bindings::riw_sock_callback_begin(sk, &mut locked, readable) };
        // SAFETY: As above.
        let ours = !LISTENER || unsafe { bindings::riw_sock_state(sk) } == TCP_LISTEN;
        if !data.is_null() && ours {
            // SAFETY: Non-NULL in the RCU read section: the reference `install` stored for
            // this handler type (trampolines are per type); `uninstall` drops it only after
            // clearing it and a grace period, so after this section.
            let handler = unsafe { Arc::from_raw(data.cast::<H>()) };
            let handler = core::mem::ManuallyDrop::new(handler);
            call(&handler, locked);
        }
        // SAFETY: Pairs with `riw_sock_callback_begin`.
        unsafe { bindings::riw_sock_callback_end(sk) };
    }

    unsafe extern "C" fn data_ready(sk: *mut bindings::sock) {
        if LISTENER {
            // SAFETY: Called by the socket layer on a live socket.
            return unsafe {
                Self::dispatch(sk, core::ptr::null_mut(), |h, _| {
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
        let mut readable = 0;
        // SAFETY: As above; `readable` is a local, stored to before `call` runs.
        unsafe {
            Self::dispatch(sk, &mut readable, |h, is_locked| {
                H::data_ready(h, is_locked.then_some((&locked, readable)))
            })
        }
    }

    unsafe extern "C" fn state_change(sk: *mut bindings::sock) {
        // SAFETY: As above.
        unsafe {
            Self::dispatch(sk, core::ptr::null_mut(), |h, _| {
                H::socket_event(h, SocketEvent::StateChange)
            })
        }
    }

    unsafe extern "C" fn write_space(sk: *mut bindings::sock) {
        // SAFETY: As above.
        unsafe {
            Self::dispatch(sk, core::ptr::null_mut(), |h, _| {
                H::socket_event(h, SocketEvent::WriteSpace)
            })
        }
    }
}

impl<H: SocketHandler> Binding<H> {
    fn install<const LISTENER: bool>(sock: &RawSocket, handler: Arc<H>) -> Self {
        let mut saved = Saved::default();
        let data = Arc::into_raw(handler).cast_mut().cast::<c_void>();
        // SAFETY: A live socket; the socket now holds the handler reference `data`.
        unsafe {
            bindings::riw_sock_install(
                sock.sock.as_ptr(),
                data,
                &Callbacks::<H, LISTENER>::TABLE,
                &mut saved.0,
            )
        };
        Self {
            saved,
            _handler: PhantomData,
        }
    }

    fn uninstall(self, sock: &RawSocket) {
        // SAFETY: A live socket with our callbacks installed; this restores the old ones
        // under the write lock and waits for running callbacks (RCU), so none of ours runs
        // after it returns. May sleep: sockets are released in process context.
        let data = unsafe { bindings::riw_sock_uninstall(sock.sock.as_ptr(), &self.saved.0) };
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
/// `zc` is a live `riw_zc` of which this object holds one reference.
pub struct ZeroCopyTicket {
    zc: NonNull<bindings::riw_zc>,
}

// SAFETY: The reference count is atomic and the release may run on any thread (the owner
// is `Send + Sync`).
unsafe impl Send for ZeroCopyTicket {}
// SAFETY: Shared use only passes the pointer to TCP, which takes its own references.
unsafe impl Sync for ZeroCopyTicket {}

impl ZeroCopyTicket {
    /// A ticket that will call `O::released(owner, token)`.
    pub fn new<O: ZeroCopyOwner>(owner: Arc<O>, token: u64) -> Result<Self> {
        let raw = Arc::into_raw(owner).cast_mut().cast::<c_void>();
        // SAFETY: `released::<O>` matches the callback type; `raw` stays valid until it
        // runs, which takes it back.
        let zc = unsafe { bindings::riw_zc_new(Some(released::<O>), raw, token) };
        match NonNull::new(zc) {
            Some(zc) => Ok(Self { zc }),
            None => {
                // SAFETY: `raw` from `Arc::into_raw` above, not handed to anyone.
                drop(unsafe { Arc::from_raw(raw.cast::<O>()) });
                Err(ENOMEM)
            }
        }
    }
}

impl Drop for ZeroCopyTicket {
    fn drop(&mut self) {
        // SAFETY: Our reference (type invariant), dropped once; the last one calls the
        // owner, here or wherever TCP frees the last skb.
        unsafe { bindings::riw_zc_put(self.zc.as_ptr()) };
    }
}

/// The release callback of tickets of owner type `O`.
///
/// # Safety
///
/// `owner` is the reference `ZeroCopyTicket::new` made with `Arc::into_raw`, passed once.
unsafe extern "C" fn released<O: ZeroCopyOwner>(owner: *mut c_void, token: u64, copied: bool) {
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
        let mut ss = remote.to_storage();
        // SAFETY: A live socket and an address of its family.
        let ret = unsafe { bindings::riw_sock_connect(this.sock.sock.as_ptr(), &mut ss) };
        if ret < 0 && ret != -(bindings::EINPROGRESS as i32) {
            return Err(Error::from_errno(ret));
        }
        Ok(this)
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

    /// Takes the socket's pending error (as `sock_error`), if any.
    pub fn take_error(&self) -> Option<Error> {
        // SAFETY: A live socket.
        let ret = unsafe { bindings::riw_sock_error(self.sock.sock.as_ptr()) };
        (ret != 0).then(|| Error::from_errno(ret))
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.sock.name(false)
    }

    pub fn peer_addr(&self) -> Result<SocketAddr> {
        self.sock.name(true)
    }

    /// The current maximum segment size.
    pub fn mss(&self) -> u32 {
        // SAFETY: A live TCP socket.
        unsafe { bindings::riw_sock_mss(self.sock.sock.as_ptr()) }
    }

    /// Sends what fits of `buf` without blocking; `more`: more data follows at once.
    /// Returns the bytes taken (EAGAIN if none fit).
    pub fn send(&self, buf: &[u8], more: bool) -> Result<usize> {
        // SAFETY: A live socket; `buf` is valid for reads of its length.
        let ret = unsafe {
            bindings::riw_sock_send(
                self.sock.sock.as_ptr(),
                buf.as_ptr().cast(),
                buf.len(),
                more,
            )
        };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(ret as usize)
    }

    /// Hands `len` bytes at `offset` of pinned user memory to TCP without copying them and
    /// without blocking; returns how many it took (EAGAIN if none). TCP keeps references
    /// to the pages until it no longer needs them, and `ticket` hears when that is.
    pub fn send_user_memory(
        &self,
        mem: &UserMemory,
        offset: usize,
        len: usize,
        ticket: &ZeroCopyTicket,
        more: bool,
    ) -> Result<usize> {
        // SAFETY: A live socket, a live umem (the C side checks the range against it) and
        // a ticket we hold a reference of for the call; TCP takes its own references on
        // the pages and on the ticket for the skbs that keep them.
        let ret = unsafe {
            bindings::riw_sock_send_umem(
                self.sock.sock.as_ptr(),
                mem.as_raw(),
                offset,
                len,
                ticket.zc.as_ptr(),
                more,
            )
        };
        if ret < 0 {
            return Err(Error::from_errno(ret as i32));
        }
        Ok(ret as usize)
    }

    /// Receives what is there, up to `buf.len()` bytes, without blocking: 0 at end of
    /// stream, EAGAIN if nothing is there yet.
    pub fn recv(&self, buf: &mut [u8]) -> Result<usize> {
        // SAFETY: A live socket; `buf` is valid for writes of its length.
        let ret = unsafe {
            bindings::riw_sock_recv(self.sock.sock.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
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
        // SAFETY: A live socket; the helper reads its fields with READ_ONCE only.
        unsafe { bindings::riw_sock_nothing_to_read(self.sock.sk()) }
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
    /// alone, so that devices on other netdevs may listen on the same port.
    pub fn listen(
        netdev: &NetDevice,
        addr: &SocketAddr,
        backlog: u32,
        handler: Arc<H>,
    ) -> Result<Self> {
        let sock = RawSocket::create(netdev, addr.family())?;
        if addr.is_wildcard() {
            // SAFETY: A live socket and device.
            to_result(unsafe {
                bindings::riw_sock_bind_to_netdev(sock.sock.as_ptr(), netdev.as_raw())
            })?;
        }
        sock.bind(addr)?;
        let binding = Some(Binding::install::<true>(&sock, handler));
        let this = Self { sock, binding };
        let backlog = core::ffi::c_int::try_from(backlog).unwrap_or(core::ffi::c_int::MAX);
        // SAFETY: A live, bound socket.
        to_result(unsafe { bindings::riw_sock_listen(this.sock.sock.as_ptr(), backlog) })?;
        Ok(this)
    }

    /// Takes the next connection waiting, if any (EAGAIN if none). Its callbacks are the
    /// listener's, which ignore it, until `attach` gives it a handler of its own.
    pub fn accept<S: SocketHandler>(&self) -> Result<TcpStream<S>> {
        let mut new = core::ptr::null_mut();
        // SAFETY: A live listening socket; on success `new` is a socket we own.
        to_result(unsafe { bindings::riw_sock_accept(self.sock.sock.as_ptr(), &mut new) })?;
        let sock = RawSocket {
            sock: NonNull::new(new).ok_or(EINVAL)?,
        };
        // SAFETY: A live TCP socket.
        unsafe { bindings::riw_sock_setup(sock.sock.as_ptr()) };
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

/// Hands one run of bytes of `riw_sock_read_locked` to the reader of
/// `LockedSocket::read_in_place`, of type `F`.
///
/// # Safety
///
/// `ctx` is the `read_in_place` reader's pointer, for its call; `data` is valid for reads
/// of `len` bytes until this returns.
unsafe extern "C" fn read_chunk<F: FnMut(&[u8]) -> usize>(
    ctx: *mut c_void,
    data: *const u8,
    len: usize,
) -> usize {
    // SAFETY: The caller passes `read_in_place`'s pointer to its live reader of type `F`.
    let reader = unsafe { &mut *ctx.cast::<F>() };
    // SAFETY: The caller guarantees `data` is valid for `len` bytes for this call; the
    // reader borrows the slice only for its own call.
    let chunk = unsafe { core::slice::from_raw_parts(data, len) };
    reader(chunk).min(len)
}
